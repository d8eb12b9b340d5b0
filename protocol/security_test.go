package protocol_test

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testcert"
	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
)

// tlsNode runs a node whose client port offers TLS with a certificate of ca.
func tlsNode(t *testing.T, ca *testcert.CA, extra ...string) *testnode.Node {
	t.Helper()
	cert := ca.Issue(t, "node")
	return startNode(t, append([]string{"--tls-cert", cert.CertFile, "--tls-key", cert.KeyFile}, extra...)...)
}

// goNSQConfig is a go-nsq configuration that upgrades to TLS trusting ca,
// presenting client when it is not nil.
func goNSQConfig(ca *testcert.CA, client *testcert.Cert) *nsq.Config {
	cfg := nsq.NewConfig()
	cfg.TlsV1 = true
	cfg.TlsConfig = &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if client != nil {
		cfg.TlsConfig.Certificates = []tls.Certificate{client.TLS}
	}
	return cfg
}

func producer(t *testing.T, addr string, cfg *nsq.Config) *nsq.Producer {
	t.Helper()
	p, err := nsq.NewProducer(addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.SetLoggerLevel(nsq.LogLevelError)
	t.Cleanup(p.Stop)
	return p
}

// receiver collects what a go-nsq consumer gets.
type receiver struct {
	mu   sync.Mutex
	got  []string
	tls  bool
	stop func()
}

func (r *receiver) HandleMessage(m *nsq.Message) error {
	r.mu.Lock()
	r.got = append(r.got, string(m.Body))
	r.mu.Unlock()
	return nil
}

func (r *receiver) has(body string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.got {
		if b == body {
			return true
		}
	}
	return false
}

func subscribe(t *testing.T, addr, topic, channel string, cfg *nsq.Config) (*receiver, error) {
	t.Helper()
	c, err := nsq.NewConsumer(topic, channel, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetLoggerLevel(nsq.LogLevelError)
	r := &receiver{}
	c.AddHandler(r)
	r.stop = func() { c.Stop(); <-c.StopChan }
	t.Cleanup(r.stop)
	return r, c.ConnectToNSQD(addr)
}

// go-nsq upgrades to TLS through IDENTIFY tls_v1, publishes and consumes
// over it, and /stats reports the connection as TLS.
func TestTLSUpgradeWithGoNSQ(t *testing.T) {
	ca := testcert.NewCA(t, "client-port")
	n := tlsNode(t, ca)
	if err := producer(t, n.TCPAddr(), goNSQConfig(ca, nil)).Publish("secure", []byte("over tls")); err != nil {
		t.Fatal(err)
	}
	r, err := subscribe(t, n.TCPAddr(), "secure", "c", goNSQConfig(ca, nil))
	if err != nil {
		t.Fatal(err)
	}
	testnode.Eventually(t, 10*time.Second, "the message over TLS", func() bool { return r.has("over tls") })

	// Compression goes on top of TLS, each upgrade ending with its OK.
	for _, compress := range []string{"snappy", "deflate"} {
		cfg := goNSQConfig(ca, nil)
		cfg.Snappy, cfg.Deflate = compress == "snappy", compress == "deflate"
		big := strings.Repeat(compress, 128000/len(compress))
		if err := producer(t, n.TCPAddr(), cfg).Publish("secure", []byte(big)); err != nil {
			t.Fatalf("TLS with %s: %v", compress, err)
		}
		testnode.Eventually(t, 10*time.Second, "the "+compress+" message over TLS", func() bool { return r.has(big) })
	}

	_, body := n.Get(t, "/stats?format=json&topic=secure")
	if !strings.Contains(body, `"tls":true`) || !strings.Contains(body, `"tls_version":"TLS 1.3"`) {
		t.Fatalf("/stats does not show the TLS consumer: %s", body)
	}
}

// With --tls-required a client that did not upgrade is refused every
// command but IDENTIFY with nsqd's fatal E_INVALID; one that upgraded works.
func TestTLSRequiredRefusesPlainClients(t *testing.T) {
	ca := testcert.NewCA(t, "client-port")
	n := tlsNode(t, ca, "--tls-required", "true")

	c := dial(t, n)
	c.send("PUB plain", []byte("x"))
	c.fatal("E_INVALID cannot PUB in current state (TLS required)")

	c = dial(t, n)
	if r := c.negotiate(map[string]any{}); r.MaxRdyCount == 0 {
		t.Fatal("IDENTIFY without tls_v1 was refused; it must be answered")
	}
	c.send("SUB plain c", nil)
	c.fatal("E_INVALID cannot SUB in current state (TLS required)")

	err := producer(t, n.TCPAddr(), nsq.NewConfig()).Publish("plain", []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "E_INVALID cannot PUB in current state (TLS required)") {
		t.Fatalf("plain go-nsq publish: err = %v, want the TLS-required refusal", err)
	}
	if err := producer(t, n.TCPAddr(), goNSQConfig(ca, nil)).Publish("plain", []byte("x")); err != nil {
		t.Fatalf("TLS go-nsq publish: %v", err)
	}
}

// --tls-client-auth-policy require-verify admits only clients whose
// certificate the --tls-root-ca-file CA signed.
func TestTLSClientCertificateRequireVerify(t *testing.T) {
	ca := testcert.NewCA(t, "client-port")
	clients := testcert.NewCA(t, "clients")
	stranger := testcert.NewCA(t, "stranger")
	n := tlsNode(t, ca, "--tls-required", "true", "--tls-client-auth-policy", "require-verify", "--tls-root-ca-file", clients.CertFile)

	if err := producer(t, n.TCPAddr(), goNSQConfig(ca, clients.Issue(t, "app"))).Publish("mtls", []byte("x")); err != nil {
		t.Fatalf("client with a certificate of the root CA: %v", err)
	}
	for name, cert := range map[string]*testcert.Cert{"no certificate": nil, "foreign certificate": stranger.Issue(t, "intruder")} {
		if err := producer(t, n.TCPAddr(), goNSQConfig(ca, cert)).Publish("mtls", []byte("x")); err == nil {
			t.Errorf("client with %s published", name)
		}
	}
}

// authService is an nsqd-compatible auth server: secrets map to grants.
type authService struct {
	mu      sync.Mutex
	grants  map[string][]protocol.Authorization
	queries []string // "secret tls common_name" of each query
}

func (a *authService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		r.ParseForm()
		q = r.PostForm
	}
	a.mu.Lock()
	a.queries = append(a.queries, q.Get("secret")+" "+q.Get("tls")+" "+q.Get("common_name"))
	grants, ok := a.grants[q.Get("secret")]
	a.mu.Unlock()
	if !ok {
		http.Error(w, "no such secret", http.StatusForbidden)
		return
	}
	ttl := 3600
	if strings.HasPrefix(q.Get("secret"), "brief") {
		ttl = 0 // asked again before every command
	}
	json.NewEncoder(w).Encode(map[string]any{"ttl": ttl, "identity": "id-" + q.Get("secret"), "identity_url": "", "authorizations": grants})
}

func startAuth(t *testing.T) (*authService, string) {
	a := &authService{grants: map[string][]protocol.Authorization{
		"writer": {{Topic: "orders.*", Permissions: []string{"publish"}}},
		"reader": {{Topic: "orders", Channels: []string{"billing"}, Permissions: []string{"subscribe"}}},
		"nobody": {},
		"brief":  {{Topic: ".*", Permissions: []string{"publish"}}},
	}}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return a, strings.TrimPrefix(srv.URL, "http://")
}

// With --auth-http-address, nsqd's AUTH protocol decides what each client
// may do: no AUTH, a refused secret, a secret without grants and a command
// outside the grants are all refused with nsqd's codes.
func TestAuthPermissions(t *testing.T) {
	auth, addr := startAuth(t)
	n := startNode(t, "--auth-http-address", addr)

	c := dial(t, n)
	c.send("PUB orders", []byte("x"))
	c.fatal("E_AUTH_FIRST AUTH required before PUB")

	c = dial(t, n)
	c.identify(map[string]any{})
	c.send("SUB orders billing", nil)
	c.fatal("E_AUTH_FIRST AUTH required before SUB")

	c = dial(t, n)
	c.send("AUTH", []byte("wrong"))
	c.fatal("E_AUTH_FAILED AUTH failed")

	c = dial(t, n)
	c.send("AUTH", []byte("nobody"))
	c.fatal("E_UNAUTHORIZED AUTH no authorizations found")

	c = dial(t, n)
	c.send("AUTH", []byte("writer"))
	c.response(`{"identity":"id-writer","identity_url":"","permission_count":1}`)
	c.send("AUTH", []byte("writer"))
	c.fatal("E_INVALID AUTH already set")

	c = dial(t, n)
	c.send("AUTH", []byte("writer"))
	c.frame()
	c.pub("orders", []byte("allowed"))
	c.send("PUB payments", []byte("x"))
	c.fatal(`E_UNAUTHORIZED AUTH failed for PUB on "payments" ""`)

	cfg := nsq.NewConfig()
	cfg.AuthSecret = "writer"
	p := producer(t, n.TCPAddr(), cfg)
	if err := p.Publish("orders.eu", []byte("by go-nsq")); err != nil {
		t.Fatalf("go-nsq publish within the grant: %v", err)
	}

	cfg = nsq.NewConfig()
	cfg.AuthSecret = "reader"
	r, err := subscribe(t, n.TCPAddr(), "orders", "billing", cfg)
	if err != nil {
		t.Fatalf("go-nsq subscribe within the grant: %v", err)
	}
	testnode.Eventually(t, 10*time.Second, "the reader gets the message", func() bool { return r.has("allowed") })

	c = dial(t, n)
	c.send("AUTH", []byte("reader"))
	c.frame()
	c.identify(map[string]any{})
	c.send("SUB orders audit", nil)
	c.fatal(`E_UNAUTHORIZED AUTH failed for SUB on "orders" "audit"`)

	// Grants expire after their TTL: the node asks again, and a secret
	// revoked meanwhile fails the next command.
	c = dial(t, n)
	c.send("AUTH", []byte("brief"))
	c.frame()
	c.pub("orders", []byte("while granted"))
	auth.mu.Lock()
	delete(auth.grants, "brief")
	auth.mu.Unlock()
	c.send("PUB orders", []byte("after revocation"))
	c.fatal("E_AUTH_FAILED AUTH failed")

	auth.mu.Lock()
	defer auth.mu.Unlock()
	if len(auth.queries) == 0 || auth.queries[0] != "wrong false " {
		t.Fatalf("auth queries = %q, want the first to be the plain-text secret %q", auth.queries, "wrong")
	}
}

// Over TLS the auth server hears tls=true and the client certificate's
// common name, and POST works as --auth-http-request-method=post.
func TestAuthOverTLSWithClientCertificate(t *testing.T) {
	auth, addr := startAuth(t)
	ca := testcert.NewCA(t, "client-port")
	clients := testcert.NewCA(t, "clients")
	n := tlsNode(t, ca, "--auth-http-address", addr, "--auth-http-request-method", "post",
		"--tls-client-auth-policy", "require-verify", "--tls-root-ca-file", clients.CertFile)
	cfg := goNSQConfig(ca, clients.Issue(t, "billing-app"))
	cfg.AuthSecret = "writer"
	if err := producer(t, n.TCPAddr(), cfg).Publish("orders", []byte("x")); err != nil {
		t.Fatal(err)
	}
	auth.mu.Lock()
	defer auth.mu.Unlock()
	if len(auth.queries) != 1 || auth.queries[0] != "writer true billing-app" {
		t.Fatalf("auth queries = %q, want one with tls=true and the common name", auth.queries)
	}
}

// --max-connections refuses the connection past the cap with an error frame;
// once one closes, a new one is accepted.
func TestMaxConnections(t *testing.T) {
	n := startNode(t, "--max-connections", "2")
	a, b := dial(t, n), dial(t, n)
	a.pub("limits", []byte("1"))
	b.pub("limits", []byte("2"))
	c := dial(t, n)
	c.fatal("E_INVALID too many connections (max 2)")
	a.conn.Close()
	testnode.Eventually(t, 10*time.Second, "a connection slot frees up", func() bool {
		d := dial(t, n)
		d.send("PUB limits", []byte("3"))
		ft, data := d.frame()
		d.conn.Close()
		return ft == protocol.FrameTypeResponse && string(data) == "OK"
	})
}

// --max-topics refuses a topic past the cap with E_PUB_FAILED and the HTTP
// API's TOO_MANY_TOPICS; topics already there keep working.
func TestMaxTopics(t *testing.T) {
	n := startNode(t, "--max-topics", "2")
	c := dial(t, n)
	c.pub("one", []byte("x"))
	c.pub("two", []byte("x"))
	c.send("PUB three", []byte("x"))
	ft, data := c.frame()
	if ft != protocol.FrameTypeError || !strings.HasPrefix(string(data), "E_PUB_FAILED PUB failed TOO_MANY_TOPICS") {
		t.Fatalf("third topic: type %d %q, want E_PUB_FAILED ... TOO_MANY_TOPICS", ft, data)
	}
	c = dial(t, n)
	c.pub("one", []byte("still works"))
	if code, body := n.Post(t, "/topic/create?topic=four", ""); code != http.StatusBadRequest || !strings.Contains(body, "TOO_MANY_TOPICS") {
		t.Fatalf("/topic/create past the cap: %d %s", code, body)
	}
}
