module github.com/partitamq/partita/tests/nsqtools

go 1.26

// nsq's own go.mod replaces go-svc; nsqadmin does not build without it.
replace github.com/judwhite/go-svc => github.com/mreiferson/go-svc v1.2.2-0.20210815184239-7a96e00010f6

tool (
	github.com/nsqio/nsq/apps/nsq_stat
	github.com/nsqio/nsq/apps/nsq_tail
	github.com/nsqio/nsq/apps/nsq_to_file
	github.com/nsqio/nsq/apps/nsqadmin
	github.com/nsqio/nsq/apps/nsqd
	github.com/nsqio/nsq/apps/nsqlookupd
	github.com/nsqio/nsq/apps/to_nsq
)

require (
	github.com/chromedp/chromedp v0.13.6
	github.com/nsqio/go-nsq v1.1.0
)

require (
	github.com/BurntSushi/toml v1.3.2 // indirect
	github.com/blang/semver v3.5.1+incompatible // indirect
	github.com/bmizerany/perks v0.0.0-20141205001514-d9a9656a3a4b // indirect
	github.com/chromedp/cdproto v0.0.0-20250403032234-65de8f5d025b // indirect
	github.com/chromedp/sysutil v1.1.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20250211171154-1ae217ad3535 // indirect
	github.com/gobwas/httphead v0.1.0 // indirect
	github.com/gobwas/pool v0.2.1 // indirect
	github.com/gobwas/ws v1.4.0 // indirect
	github.com/golang/snappy v0.0.4 // indirect
	github.com/judwhite/go-svc v1.2.1 // indirect
	github.com/julienschmidt/httprouter v1.3.0 // indirect
	github.com/mreiferson/go-options v1.0.0 // indirect
	github.com/nsqio/go-diskqueue v1.1.0 // indirect
	github.com/nsqio/nsq v1.3.0 // indirect
	golang.org/x/sys v0.29.0 // indirect
)
