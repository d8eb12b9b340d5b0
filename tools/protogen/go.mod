module github.com/partitamq/partita/tools/protogen

go 1.26.8

require (
	github.com/bufbuild/protocompile v0.14.1
	github.com/planetscale/vtprotobuf v0.6.1-0.20240319094008-0393e58bdf10
	google.golang.org/protobuf v1.36.12
)

require golang.org/x/sync v0.8.0 // indirect
