// Command protogen turns the .proto files of a directory into .pb.go files
// beside them, without protoc: protocompile parses and links in pure Go, the
// generator behind protoc-gen-go writes the messages, and vtprotobuf's
// writes their MarshalVT, UnmarshalVT and SizeVT (_vtproto.pb.go), which
// the replication sessions' frames use: they decode without reflection, at
// a frame or more per message replicated. Keeping all three pinned in this
// module makes a fresh checkout regenerate byte-identical output.
//
// Usage, from the repository root:
//
//	(cd tools/protogen && go run . ../../messages)
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/bufbuild/protocompile"
	_ "github.com/planetscale/vtprotobuf/features/marshal"
	_ "github.com/planetscale/vtprotobuf/features/size"
	_ "github.com/planetscale/vtprotobuf/features/unmarshal"
	vtgen "github.com/planetscale/vtprotobuf/generator"
	gengo "google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: protogen DIR...  (writes DIR/*.pb.go from DIR/*.proto)")
		os.Exit(2)
	}
	for _, dir := range os.Args[1:] {
		written, err := generate(dir, dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "protogen: %s: %v\n", dir, err)
			os.Exit(1)
		}
		for _, name := range written {
			fmt.Println(name)
		}
	}
}

// generate compiles every .proto file directly in srcDir and writes the
// generated Go files into outDir, returning their paths. Imports resolve
// relative to srcDir, plus the well-known google/protobuf files.
func generate(srcDir, outDir string) ([]string, error) {
	protoFiles, err := filepath.Glob(filepath.Join(srcDir, "*.proto"))
	if err != nil {
		return nil, err
	}
	if len(protoFiles) == 0 {
		return nil, errors.New("no .proto files found")
	}
	names := make([]string, len(protoFiles))
	for i, p := range protoFiles {
		names[i] = filepath.Base(p)
	}
	slices.Sort(names)

	req, err := codeGeneratorRequest(srcDir, names)
	if err != nil {
		return nil, err
	}
	resp, err := runGenerator(req)
	if err != nil {
		return nil, err
	}
	return writeFiles(outDir, resp)
}

func codeGeneratorRequest(srcDir string, names []string) (*pluginpb.CodeGeneratorRequest, error) {
	compiler := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			ImportPaths: []string{srcDir},
		}),
		// Keep comments: they become the doc comments of the Go types.
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	files, err := compiler.Compile(context.Background(), names...)
	if err != nil {
		return nil, err
	}
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: names,
		// source_relative puts partita.pb.go beside partita.proto instead of
		// under a directory tree named after the Go import path.
		Parameter: proto.String("paths=source_relative"),
	}
	seen := map[string]bool{}
	for _, f := range files {
		req.ProtoFile = appendWithImports(req.ProtoFile, f, seen)
	}
	return req, nil
}

// appendWithImports adds fd after everything it imports, the order a
// CodeGeneratorRequest requires.
func appendWithImports(out []*descriptorpb.FileDescriptorProto, fd protoreflect.FileDescriptor, seen map[string]bool) []*descriptorpb.FileDescriptorProto {
	if seen[fd.Path()] {
		return out
	}
	seen[fd.Path()] = true
	imports := fd.Imports()
	for i := 0; i < imports.Len(); i++ {
		out = appendWithImports(out, imports.Get(i).FileDescriptor, seen)
	}
	return append(out, protodesc.ToFileDescriptorProto(fd))
}

func runGenerator(req *pluginpb.CodeGeneratorRequest) (*pluginpb.CodeGeneratorResponse, error) {
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		return nil, err
	}
	for _, f := range gen.Files {
		if f.Generate {
			gengo.GenerateFile(gen, f)
		}
	}
	vt, err := vtgen.NewGenerator(gen, vtFeatures, &vtgen.Config{
		Poolable: vtgen.NewObjectSet(), PoolableExclude: vtgen.NewObjectSet(),
	})
	if err != nil {
		return nil, err
	}
	vt.Generate()
	gen.SupportedFeatures = gengo.SupportedFeatures
	gen.SupportedEditionsMinimum = gengo.SupportedEditionsMinimum
	gen.SupportedEditionsMaximum = gengo.SupportedEditionsMaximum
	resp := gen.Response()
	if resp.Error != nil {
		return nil, errors.New(resp.GetError())
	}
	return resp, nil
}

// vtFeatures are the vtprotobuf methods generated: encoding and decoding
// only; its pools, clones and equality are not used.
var vtFeatures = []string{"marshal", "unmarshal", "size"}

// vtVersionLine is the header line in which vtprotobuf's generator names
// the version of the program running it: this module's, which is a pseudo
// version stamped from the checkout's commit when built from one. The
// line names the generator's own pinned version instead, so the output
// does not change with the commit it is generated at.
const vtVersionLine = "// protoc-gen-go-vtproto version: "

func pinVTVersion(content string) string {
	version := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/planetscale/vtprotobuf" {
				version = d.Version
			}
		}
	}
	lines := strings.SplitAfter(content, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, vtVersionLine) {
			lines[i] = vtVersionLine + version + "\n"
		}
	}
	return strings.Join(lines, "")
}

func writeFiles(outDir string, resp *pluginpb.CodeGeneratorResponse) ([]string, error) {
	var written []string
	for _, f := range resp.File {
		// The generator names files itself; refuse anything that would land
		// outside outDir.
		if !filepath.IsLocal(f.GetName()) {
			return written, fmt.Errorf("generator produced a file outside the output directory: %q", f.GetName())
		}
		path := filepath.Join(outDir, f.GetName())
		if err := os.WriteFile(path, []byte(pinVTVersion(f.GetContent())), 0o644); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}
