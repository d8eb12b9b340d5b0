package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const messagesDir = "../../messages"

// TestCommittedMessagesAreCurrent fails when messages/*.pb.go was not
// regenerated after a change to messages/*.proto (or to this generator).
func TestCommittedMessagesAreCurrent(t *testing.T) {
	out := t.TempDir()
	if _, err := generate(messagesDir, out); err != nil {
		t.Fatalf("generate: %v", err)
	}
	fresh := pbGoFiles(t, out)
	committed := pbGoFiles(t, messagesDir)
	if len(fresh) == 0 {
		t.Fatal("generator wrote no .pb.go files")
	}
	for name, want := range fresh {
		got, ok := committed[name]
		if !ok {
			t.Errorf("messages/%s is missing; run tools/protogen/gen.sh", name)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("messages/%s is stale; run tools/protogen/gen.sh", name)
		}
	}
	for name := range committed {
		if _, ok := fresh[name]; !ok {
			t.Errorf("messages/%s has no .proto source; delete it", name)
		}
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	for _, dir := range []string{first, second} {
		if _, err := generate(messagesDir, dir); err != nil {
			t.Fatalf("generate into %s: %v", dir, err)
		}
	}
	a, b := pbGoFiles(t, first), pbGoFiles(t, second)
	if len(a) != len(b) {
		t.Fatalf("runs wrote %d and %d files", len(a), len(b))
	}
	for name, content := range a {
		if !bytes.Equal(content, b[name]) {
			t.Errorf("%s differs between two runs", name)
		}
	}
}

func TestGenerateRejectsBadInput(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		wantErr string
	}{
		{
			name:    "no proto files",
			files:   map[string]string{"README": "nothing here"},
			wantErr: "no .proto files",
		},
		{
			name: "syntax error",
			files: map[string]string{"bad.proto": `syntax = "proto3";
option go_package = "example.com/bad";
message Broken { string name = ; }`},
			wantErr: "bad.proto",
		},
		{
			name: "unknown import",
			files: map[string]string{"a.proto": `syntax = "proto3";
import "missing.proto";
option go_package = "example.com/a";`},
			wantErr: "missing.proto",
		},
		{
			name: "no go_package",
			files: map[string]string{"nopkg.proto": `syntax = "proto3";
message M {}`},
			wantErr: "go_package",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := t.TempDir()
			for name, content := range tt.files {
				if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out := t.TempDir()
			written, err := generate(src, out)
			if err == nil {
				t.Fatalf("generate succeeded, wrote %v", written)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
			if left := pbGoFiles(t, out); len(left) != 0 {
				t.Errorf("failed run left files behind: %d", len(left))
			}
		})
	}
}

func pbGoFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.pb.go"))
	if err != nil {
		t.Fatal(err)
	}
	files := make(map[string][]byte, len(paths))
	for _, p := range paths {
		content, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = content
	}
	return files
}
