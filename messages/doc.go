// Package messages holds the protobuf types that cross node boundaries or are
// persisted. partita.pb.go is generated from partita.proto; regenerate it from
// the repository root with:
//
//	(cd tools/protogen && go run . ../../messages)
//
// or tools/protogen/gen.sh, which does the same.
package messages
