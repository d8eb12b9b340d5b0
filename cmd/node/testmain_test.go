package main

import (
	"os"
	"testing"

	"github.com/partitamq/partita/internal/testnode"
)

func TestMain(m *testing.M) { os.Exit(testnode.Run(m)) }
