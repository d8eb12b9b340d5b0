package protocol

import (
	"bufio"
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// Client certificate policies of --tls-client-auth-policy, as nsqd names them.
const (
	ClientAuthNone          = ""
	ClientAuthRequire       = "require"
	ClientAuthRequireVerify = "require-verify"
)

// TLSOptions are the client port's TLS settings.
type TLSOptions struct {
	CertFile, KeyFile string
	// RootCAFile verifies client certificates when set.
	RootCAFile       string
	ClientAuthPolicy string
	// MinVersion is the oldest TLS version accepted; 0 is TLS 1.2.
	MinVersion uint16
}

// TLSVersion reads nsqd's --tls-min-version names. SSL 3.0, which nsqd
// still names, is refused: Go does not speak it.
func TLSVersion(name string) (uint16, error) {
	switch strings.ToLower(name) {
	case "tls1.0":
		return tls.VersionTLS10, nil
	case "tls1.1":
		return tls.VersionTLS11, nil
	case "tls1.2", "":
		return tls.VersionTLS12, nil
	case "tls1.3":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("TLS version %q: must be tls1.0, tls1.1, tls1.2 or tls1.3", name)
}

// ServerTLSConfig builds the client port's TLS configuration: nil when no
// certificate is configured, which leaves tls_v1 ungranted. As in nsqd, a
// client certificate is checked against the root CA when one is given, and
// the policy can demand a certificate.
func ServerTLSConfig(o TLSOptions) (*tls.Config, error) {
	if o.CertFile == "" && o.KeyFile == "" {
		if o.ClientAuthPolicy != ClientAuthNone || o.RootCAFile != "" {
			return nil, errors.New("--tls-client-auth-policy and --tls-root-ca-file need --tls-cert and --tls-key")
		}
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: cmp.Or(o.MinVersion, tls.VersionTLS12)}
	if o.RootCAFile != "" {
		if cfg.ClientCAs, err = LoadCertPool(o.RootCAFile); err != nil {
			return nil, err
		}
		// A certificate the root CA does not vouch for would hand the
		// auth server a common name anyone can choose.
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	switch o.ClientAuthPolicy {
	case ClientAuthNone:
	case ClientAuthRequire:
		cfg.ClientAuth = tls.RequireAnyClientCert
	case ClientAuthRequireVerify:
		if cfg.ClientCAs == nil {
			return nil, errors.New("--tls-client-auth-policy require-verify needs --tls-root-ca-file")
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("--tls-client-auth-policy %q: want require or require-verify", o.ClientAuthPolicy)
	}
	return cfg, nil
}

// LoadCertPool reads PEM certificates into a pool.
func LoadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tls root CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls root CA %s: no PEM certificate", path)
	}
	return pool, nil
}

// bufferedConn reads through the session's buffered reader, so bytes of
// the TLS handshake that arrived with the IDENTIFY are not lost.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// tlsHandshakeTimeout bounds a client that asked for TLS and went silent.
const tlsHandshakeTimeout = 5 * time.Second

// upgradeTLS runs the server side of the handshake over the session's
// connection; deadlines stay on the raw connection, which the TLS
// connection reads and writes through.
func (s *session) upgradeTLS() (*tls.Conn, error) {
	tc := tls.Server(bufferedConn{Conn: s.conn, r: s.r}, s.srv.TLSConfig)
	s.conn.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	err := tc.Handshake()
	s.conn.SetDeadline(time.Time{})
	if err != nil {
		return nil, err
	}
	st := tc.ConnectionState()
	s.tlsState.Store(&st)
	return tc, nil
}
