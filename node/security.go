package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/protocol"
	"github.com/partitamq/partita/replication"
)

// validateSecurity checks the TLS, auth and admin flags that can be checked
// without reading files.
func (c Config) validateSecurity() error {
	switch c.TLSRequired {
	case "false", "true", "tcp-https":
	default:
		return fmt.Errorf("--tls-required %q: must be false, true or tcp-https", c.TLSRequired)
	}
	if c.TLSRequiredOnTCP() && c.TLSCert == "" {
		return errors.New("--tls-required needs --tls-cert and --tls-key")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if _, err := protocol.TLSVersion(c.TLSMinVersion); err != nil {
		return fmt.Errorf("--tls-min-version: %w", err)
	}
	if c.HTTPSAddress != "" {
		if c.TLSCert == "" {
			return errors.New("--https-address needs --tls-cert and --tls-key")
		}
		if err := checkHostPort(c.HTTPSAddress); err != nil {
			return fmt.Errorf("--https-address %q: %v", c.HTTPSAddress, err)
		}
	}
	switch c.TLSClientAuthPolicy {
	case protocol.ClientAuthNone, protocol.ClientAuthRequire, protocol.ClientAuthRequireVerify:
	default:
		return fmt.Errorf("--tls-client-auth-policy %q: must be require or require-verify", c.TLSClientAuthPolicy)
	}
	switch strings.ToLower(c.AuthHTTPRequestMethod) {
	case "get", "post":
	default:
		return fmt.Errorf("--auth-http-request-method %q: must be get or post", c.AuthHTTPRequestMethod)
	}
	if _, err := c.AdminAllow(); err != nil {
		return err
	}
	set := 0
	for _, v := range []string{c.ClusterTLSCert, c.ClusterTLSKey, c.ClusterTLSCA} {
		if v != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		return errors.New("--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca go together")
	}
	return nil
}

// TLSRequiredOnTCP is whether the client port refuses plain-text commands.
func (c Config) TLSRequiredOnTCP() bool { return c.TLSRequired != "false" }

// AdminAllow parses --http-admin-allow; nil allows everyone.
func (c Config) AdminAllow() ([]netip.Prefix, error) {
	if c.HTTPAdminAllow == "" {
		return nil, nil
	}
	var out []netip.Prefix
	for _, s := range strings.Split(c.HTTPAdminAllow, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("--http-admin-allow %q: %v", c.HTTPAdminAllow, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// clientTLS is the client port's TLS configuration, nil without a certificate.
func (c Config) clientTLS() (*tls.Config, error) {
	min, err := protocol.TLSVersion(c.TLSMinVersion)
	if err != nil {
		return nil, fmt.Errorf("--tls-min-version: %w", err)
	}
	return protocol.ServerTLSConfig(protocol.TLSOptions{
		CertFile: c.TLSCert, KeyFile: c.TLSKey, RootCAFile: c.TLSRootCAFile, ClientAuthPolicy: c.TLSClientAuthPolicy,
		MinVersion: min,
	})
}

// authServer is the auth service client, nil when auth is off.
func (c Config) authServer() *protocol.AuthServer {
	if c.AuthHTTPAddress == "" {
		return nil
	}
	return &protocol.AuthServer{Addresses: strings.Split(c.AuthHTTPAddress, ","), Method: strings.ToUpper(c.AuthHTTPRequestMethod)}
}

// clusterTLS is the node-to-node mutual TLS, nil when not configured.
func (c Config) clusterTLS() (*replication.TLS, error) {
	if c.ClusterTLSCert == "" {
		return nil, nil
	}
	return replication.LoadTLS(c.ClusterTLSCert, c.ClusterTLSKey, c.ClusterTLSCA)
}

// etcdTLS puts etcd behind the cluster certificate too: a node without it
// cannot reach the metadata, so it cannot register and join.
func (c Config) etcdTLS() *cluster.EtcdTLS {
	if c.ClusterTLSCert == "" {
		return nil
	}
	return &cluster.EtcdTLS{CertFile: c.ClusterTLSCert, KeyFile: c.ClusterTLSKey, CAFile: c.ClusterTLSCA}
}
