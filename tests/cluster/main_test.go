package cluster

import (
	"os"
	"testing"

	"github.com/partitamq/partita/internal/testnode"
)

func TestMain(m *testing.M) {
	// This binary is also the etcd member of tests that run it apart
	// (testnode.StartEtcdProcess).
	testnode.ServeEtcdIfAsked()
	os.Exit(testnode.Run(m))
}
