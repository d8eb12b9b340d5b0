package replication

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
)

// TLS is the node-to-node port's mutual TLS: every node presents a
// certificate signed by the cluster CA, as server and as client, and
// accepts only peers that do the same. A node without such a certificate
// can neither open a replication stream nor accept one.
type TLS struct {
	cert tls.Certificate
	ca   *x509.CertPool
}

// LoadTLS reads this node's certificate and key and the cluster CA.
func LoadTLS(certFile, keyFile, caFile string) (*TLS, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster tls certificate: %w", err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("cluster tls CA: %w", err)
	}
	ca := x509.NewCertPool()
	if !ca.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("cluster tls CA %s: no PEM certificate", caFile)
	}
	return NewTLS(cert, ca), nil
}

// NewTLS makes the mutual TLS of a node from its certificate and the CA.
func NewTLS(cert tls.Certificate, ca *x509.CertPool) *TLS {
	return &TLS{cert: cert, ca: ca}
}

// serverConfig demands and verifies the leader's client certificate.
func (t *TLS) serverConfig() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{t.cert},
		ClientCAs:    t.ca,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
}

// clientConfig verifies the follower's certificate against the CA and the
// dialled host, and presents this node's.
func (t *TLS) clientConfig(addr string) *tls.Config {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return &tls.Config{
		Certificates: []tls.Certificate{t.cert},
		RootCAs:      t.ca,
		ServerName:   host,
		MinVersion:   tls.VersionTLS13,
	}
}
