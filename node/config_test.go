package node

import (
	"errors"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func envOf(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func writeTOML(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "partita.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigDefaults(t *testing.T) {
	c, _, err := LoadConfig(nil, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"tcp-address", c.TCPAddress, "0.0.0.0:4150"},
		{"http-address", c.HTTPAddress, "0.0.0.0:4151"},
		{"cluster-address", c.ClusterAddress, "0.0.0.0:4152"},
		{"etcd-client-address", c.EtcdClientAddress, "127.0.0.1:4379"},
		{"etcd-peer-address", c.EtcdPeerAddress, "127.0.0.1:4380"},
		{"gc-percent", c.GCPercent, 400},
		{"node-id", c.NodeID, strconv.Itoa(int(crc32.ChecksumIEEE([]byte(host)) % 1024))},
		{"max-msg-size", c.MaxMsgSize, int64(1048576)},
		{"max-req-timeout", c.MaxReqTimeout, time.Hour},
		{"output-buffer-timeout", c.OutputBufferTimeout, 250 * time.Millisecond},
		{"snappy", c.Snappy, true},
		{"sync-every", c.SyncEvery, 2500},
		{"max-pub-waiting", c.MaxPubWaiting, 100000},
		{"shutdown-timeout", c.ShutdownTimeout, 25 * time.Second},
		{"leader-balance-interval", c.LeaderBalanceInterval, 5 * time.Minute},
		{"leader-balance-moves", c.LeaderBalanceMoves, 32},
		{"forward-timeout", c.ForwardTimeout, 5 * time.Second},
		{"max-clock-skew", c.MaxClockSkew, time.Second},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("--%s default = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestConfigPrecedence(t *testing.T) {
	file := writeTOML(t, `
tcp_address = "10.0.0.3:4150"
msg_timeout = "30s"
`)
	tests := []struct {
		name        string
		args        []string
		env         map[string]string
		wantAddr    string
		wantTimeout time.Duration
	}{
		{"default", nil, nil, "0.0.0.0:4150", 60 * time.Second},
		{"file over default", []string{"--config", file}, nil, "10.0.0.3:4150", 30 * time.Second},
		{"env over file",
			[]string{"--config", file},
			map[string]string{"PARTITA_TCP_ADDRESS": "10.0.0.2:4150", "PARTITA_MSG_TIMEOUT": "20s"},
			"10.0.0.2:4150", 20 * time.Second},
		{"flag over env and file",
			[]string{"--config", file, "--tcp-address", "10.0.0.1:4150", "-msg-timeout=10s"},
			map[string]string{"PARTITA_TCP_ADDRESS": "10.0.0.2:4150", "PARTITA_MSG_TIMEOUT": "20s"},
			"10.0.0.1:4150", 10 * time.Second},
		{"config path from env", nil, map[string]string{"PARTITA_CONFIG": file}, "10.0.0.3:4150", 30 * time.Second},
		{"empty env is unset", nil, map[string]string{"PARTITA_TCP_ADDRESS": ""}, "0.0.0.0:4150", 60 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, err := LoadConfig(tt.args, envOf(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if c.TCPAddress != tt.wantAddr || c.MsgTimeout != tt.wantTimeout {
				t.Errorf("got %s %v, want %s %v", c.TCPAddress, c.MsgTimeout, tt.wantAddr, tt.wantTimeout)
			}
		})
	}
}

func TestConfigEnvNaming(t *testing.T) {
	c, _, err := LoadConfig(nil, envOf(map[string]string{
		"PARTITA_MAX_OUTPUT_BUFFER_TIMEOUT": "45s",
		"PARTITA_SNAPPY":                    "false",
		"PARTITA_ETCD_TICK_MS":              "10",
		"PARTITA_NODE_ID":                   "7",
		"PARTITA_BROADCAST_ADDRESS":         "node7.example",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxOutputBufferTimeout != 45*time.Second || c.Snappy || c.EtcdTickMS != 10 || c.NodeID != "7" ||
		c.BroadcastAddr != "node7.example" {
		t.Errorf("env not applied: %+v", c)
	}
}

func TestConfigTOMLTypes(t *testing.T) {
	file := writeTOML(t, `
log_level = "debug"
output_buffer_timeout = "100ms"
min_output_buffer_timeout = "5ms"
max_req_timeout = "2h30m"
default_partitions = 8
max_bytes_per_file = 1048576
deflate = false
etcd_endpoints = "http://a:2379,http://b:2379"
`)
	c, _, err := LoadConfig([]string{"--config=" + file}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.LogLevel != "debug" || c.OutputBufferTimeout != 100*time.Millisecond ||
		c.MinOutputBufferTimeout != 5*time.Millisecond || c.MaxReqTimeout != 150*time.Minute ||
		c.DefaultPartitions != 8 || c.MaxBytesPerFile != 1048576 || c.Deflate ||
		c.EtcdEndpoints != "http://a:2379,http://b:2379" {
		t.Errorf("file not applied: %+v", c)
	}
}

func TestConfigSourceErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want []string
	}{
		{"unknown keys", nil, nil, "tcp_adress = \"x:1\"\nmsg_timeout = \"1s\"\nbogus = 1\n",
			[]string{"unknown keys", "bogus", "tcp_adress"}},
		{"config key in file", nil, nil, "config = \"other.toml\"\n", []string{"unknown keys", "config"}},
		{"bad duration in file", nil, nil, "msg_timeout = \"soon\"\n",
			[]string{"config file", "msg_timeout", "--msg-timeout", "want a duration"}},
		{"duration without unit in file", nil, nil, "msg_timeout = 250\n",
			[]string{"config file", "--msg-timeout"}},
		{"bool for int in file", nil, nil, "max_rdy_count = true\n",
			[]string{"config file", "--max-rdy-count"}},
		{"array in file", nil, nil, "tcp_address = [\"a:1\"]\n",
			[]string{"config file", "--tcp-address", "want a string"}},
		{"broken file", nil, nil, "tcp_address = \n", []string{"config file"}},
		{"missing file", []string{"--config", "/nonexistent/partita.toml"}, nil, "",
			[]string{"config file", "/nonexistent/partita.toml"}},
		{"bad env", nil, map[string]string{"PARTITA_MAX_RDY_COUNT": "lots"}, "",
			[]string{"PARTITA_MAX_RDY_COUNT", "--max-rdy-count", "want an integer"}},
		{"bad flag", []string{"--sync-timeout", "x"}, nil, "", []string{"command line", "sync-timeout"}},
		{"unknown flag", []string{"--no-such-flag"}, nil, "", []string{"command line", "no-such-flag"}},
		{"positional argument", []string{"extra"}, nil, "", []string{"command line", "extra"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config", writeTOML(t, tt.file)}, args...)
			}
			_, fs, err := loadQuietly(args, envOf(tt.env))
			if err == nil {
				t.Fatal("no error")
			}
			if fs == nil {
				t.Error("no FlagSet returned with the error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--tcp-address", "4150"}, "--tcp-address"},
		{[]string{"--http-address", "localhost:http"}, "--http-address"},
		{[]string{"--cluster-address", "host:70000"}, "--cluster-address"},
		{[]string{"--etcd-client-address", ""}, "--etcd-client-address"},
		{[]string{"--etcd-peer-address", "a:b:c"}, "--etcd-peer-address"},
		{[]string{"--etcd-endpoints", "http://a:2379,"}, "--etcd-endpoints"},
		{[]string{"--log-level", "verbose"}, "--log-level"},
		{[]string{"--data-path", ""}, "--data-path"},
		{[]string{"--max-msg-size", "0"}, "--max-msg-size"},
		{[]string{"--max-body-size", "-1"}, "--max-body-size"},
		{[]string{"--max-output-buffer-size", "0"}, "--max-output-buffer-size"},
		{[]string{"--max-bytes-per-file", "0"}, "--max-bytes-per-file"},
		{[]string{"--max-rdy-count", "0"}, "--max-rdy-count"},
		{[]string{"--default-replicas", "0"}, "--default-replicas"},
		{[]string{"--sync-every", "0"}, "--sync-every"},
		{[]string{"--write-window", "0"}, "--write-window"},
		{[]string{"--max-batch-messages", "0"}, "--max-batch-messages"},
		{[]string{"--max-pub-waiting", "0"}, "--max-pub-waiting"},
		{[]string{"--gc-percent", "0"}, "--gc-percent"},
		{[]string{"--gc-percent", "-2"}, "--gc-percent"},
		{[]string{"--leader-balance-interval", "-1s"}, "--leader-balance-interval"},
		{[]string{"--leader-balance-moves", "0"}, "--leader-balance-moves"},
		{[]string{"--leader-move-drain", "-1ms"}, "--leader-move-drain"},
		{[]string{"--leader-move-drain", "3s"}, "--leader-move-drain"},
		{[]string{"--forward-move-grace", "-1ms"}, "--forward-move-grace"},
		{[]string{"--max-confirm-window", "0"}, "--max-confirm-window"},
		{[]string{"--etcd-tick-ms", "-1"}, "--etcd-tick-ms"},
		{[]string{"--etcd-election-ms", "-1"}, "--etcd-election-ms"},
		{[]string{"--max-channel-consumers", "-1"}, "--max-channel-consumers"},
		{[]string{"--mem-queue-size", "-1"}, "--mem-queue-size"},
		{[]string{"--write-timeout", "0s"}, "--write-timeout"},
		{[]string{"--max-clock-skew", "0s"}, "--max-clock-skew"},
		{[]string{"--forward-timeout", "1s"}, "--max-clock-skew 1s must be less than --forward-timeout 1s"},
		{[]string{"--forward-timeout", "0s"}, "--forward-timeout"},
		{[]string{"--shutdown-timeout", "-1s"}, "--shutdown-timeout"},
		{[]string{"--default-partitions", "0"}, "--default-partitions"},
		{[]string{"--default-partitions", "1025"}, "--default-partitions"},
		{[]string{"--node-id", ""}, "--node-id"},
		{[]string{"--node-id", "a/b"}, "--node-id"},
		{[]string{"--max-deflate-level", "10"}, "--max-deflate-level"},
		{[]string{"--output-buffer-timeout", "10ms"}, "--min-output-buffer-timeout"},
		{[]string{"--output-buffer-timeout", "1m"}, "--max-output-buffer-timeout"},
		{[]string{"--msg-timeout", "16m"}, "--max-msg-timeout"},
		{[]string{"--tls-required", "yes"}, "--tls-required"},
		{[]string{"--tls-required", "true"}, "--tls-required"},
		{[]string{"--tls-cert", "c.pem"}, "--tls-key"},
		{[]string{"--tls-client-auth-policy", "maybe"}, "--tls-client-auth-policy"},
		{[]string{"--tls-min-version", "ssl3.0"}, "--tls-min-version"},
		{[]string{"--https-address", "127.0.0.1:4443"}, "--https-address needs --tls-cert"},
		{[]string{"--https-address", "nope", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "--https-address"},
		{[]string{"--auth-http-request-method", "put"}, "--auth-http-request-method"},
		{[]string{"--max-connections", "-1"}, "--max-connections"},
		{[]string{"--max-topics", "-1"}, "--max-topics"},
		{[]string{"--http-admin-allow", "10.0.0.0/8,nonsense"}, "--http-admin-allow"},
		{[]string{"--cluster-tls-cert", "c.pem"}, "--cluster-tls-ca"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, "="), func(t *testing.T) {
			_, _, err := LoadConfig(tt.args, envOf(nil))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}

	edges := [][]string{
		{"--node-id", "0"}, {"--node-id", "1023"}, {"--node-id", "n1"},
		{"--default-partitions", "1024"}, {"--sync-every", "1"}, {"--max-rdy-count", "1"},
		{"--msg-timeout", "15m"}, {"--output-buffer-timeout", "25ms"}, {"--output-buffer-timeout", "30s"},
		{"--tcp-address", ":4150"}, {"--tcp-address", "[::1]:4150"},
		{"--tls-required", "tcp-https", "--tls-cert", "c.pem", "--tls-key", "k.pem"},
		{"--http-admin-allow", "127.0.0.1/32, 10.0.0.0/8,::1/128"}, {"--auth-http-request-method", "post"},
	}
	for _, args := range edges {
		if _, _, err := LoadConfig(args, envOf(nil)); err != nil {
			t.Errorf("%v rejected: %v", args, err)
		}
	}
}

func TestConfigBroadcastAddress(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		broadcast, tcp, want string
	}{
		{"public.example", "0.0.0.0:4150", "public.example"},
		{"", "10.1.2.3:4150", "10.1.2.3"},
		{"", "node1.internal:4150", "node1.internal"},
		{"", "[fe80::1]:4150", "fe80::1"},
		{"", "0.0.0.0:4150", host},
		{"", "[::]:4150", host},
		{"", ":4150", host},
	}
	for _, tt := range tests {
		c := Config{BroadcastAddr: tt.broadcast, TCPAddress: tt.tcp}
		if got := c.BroadcastAddress(); got != tt.want {
			t.Errorf("broadcast %q tcp %q: got %q, want %q", tt.broadcast, tt.tcp, got, tt.want)
		}
	}
}

func TestConfigHelp(t *testing.T) {
	out := captureStderr(t, func() {
		_, _, err := LoadConfig([]string{"--help"}, envOf(nil))
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("err = %v, want flag.ErrHelp", err)
		}
	})
	for _, want := range []string{"-tcp-address", "-max-pub-waiting", "-mem-queue-size", "PARTITA_"} {
		if !strings.Contains(out, want) {
			t.Errorf("help output lacks %q:\n%s", want, out)
		}
	}
}

// loadQuietly keeps the flag package's usage dump on parse errors out of the
// test log.
func loadQuietly(args []string, getenv func(string) string) (c Config, fs *flag.FlagSet, err error) {
	devNull, openErr := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if openErr != nil {
		return LoadConfig(args, getenv)
	}
	defer devNull.Close()
	saved := os.Stderr
	os.Stderr = devNull
	defer func() { os.Stderr = saved }()
	return LoadConfig(args, getenv)
}

func captureStderr(t *testing.T, run func()) string {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stderr
	os.Stderr = f
	run()
	os.Stderr = saved
	out, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
