module github.com/partitamq/partita/benchmarks/e2e

go 1.26.0

replace github.com/judwhite/go-svc => github.com/mreiferson/go-svc v1.2.2-0.20210815184239-7a96e00010f6

tool (
	github.com/nsqio/nsq/apps/nsqd
	github.com/nsqio/nsq/bench/bench_reader
	github.com/nsqio/nsq/bench/bench_writer
)

require (
	github.com/nats-io/nats.go v1.55.0
	github.com/nsqio/go-nsq v1.1.0
	github.com/nsqio/nsq v1.3.0
	golang.org/x/exp v0.0.0-20261113113407-e3970619a1a4
	golang.org/x/sys v0.48.0
)

require (
	github.com/BurntSushi/toml v1.3.2 // indirect
	github.com/blang/semver v3.5.1+incompatible // indirect
	github.com/bmizerany/perks v0.0.0-20141205001514-d9a9656a3a4b // indirect
	github.com/golang/snappy v0.0.4 // indirect
	github.com/judwhite/go-svc v1.2.1 // indirect
	github.com/julienschmidt/httprouter v1.3.0 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/mreiferson/go-options v1.0.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/nsqio/go-diskqueue v1.1.0 // indirect
	golang.org/x/crypto v0.57.0 // indirect
)
