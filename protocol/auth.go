package protocol

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Permissions an auth server grants, as nsqd names them.
const (
	PermissionPublish   = "publish"
	PermissionSubscribe = "subscribe"
)

// AuthServer asks nsqd-compatible auth services (--auth-http-address) what
// a client's secret allows.
type AuthServer struct {
	// Addresses are host:port of the services, tried in order until one
	// answers.
	Addresses []string
	// Method is GET (default) or POST, as --auth-http-request-method.
	Method string
	// Client is the HTTP client; a 5s-timeout one when nil.
	Client *http.Client
}

// Authorization is one grant of the auth server's answer: the topic and
// channel patterns are regular expressions matched against whole names.
type Authorization struct {
	Topic       string   `json:"topic"`
	Channels    []string `json:"channels"`
	Permissions []string `json:"permissions"`
}

// AuthState is what the auth server answered for one secret.
type AuthState struct {
	TTL            int             `json:"ttl"`
	Identity       string          `json:"identity"`
	IdentityURL    string          `json:"identity_url"`
	Authorizations []Authorization `json:"authorizations"`

	expires time.Time
}

// Allows says whether the grants cover permission on topic (and channel,
// for subscribe).
func (a *AuthState) Allows(permission, topic, channel string) bool {
	for _, z := range a.Authorizations {
		if !hasString(z.Permissions, permission) || !wholeMatch(z.Topic, topic) {
			continue
		}
		if permission == PermissionPublish {
			return true
		}
		for _, c := range z.Channels {
			if wholeMatch(c, channel) {
				return true
			}
		}
	}
	return false
}

func (a *AuthState) expired(now time.Time) bool { return now.After(a.expires) }

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// wholeMatch anchors pattern at both ends; a pattern that does not compile
// grants nothing.
func wholeMatch(pattern, s string) bool {
	ok, err := regexp.MatchString("^(?:"+pattern+")$", s)
	return err == nil && ok
}

// Query asks the services about secret for a client at remoteIP.
func (a *AuthServer) Query(ctx context.Context, remoteIP string, tlsState *tls.ConnectionState, secret string) (*AuthState, error) {
	v := url.Values{}
	v.Set("remote_ip", remoteIP)
	v.Set("tls", fmt.Sprint(tlsState != nil))
	v.Set("secret", secret)
	v.Set("common_name", commonName(tlsState))
	var errs []error
	for _, addr := range a.Addresses {
		st, err := a.queryOne(ctx, addr, v)
		if err == nil {
			return st, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, errors.New("no auth server configured")
	}
	return nil, errors.Join(errs...)
}

func (a *AuthServer) queryOne(ctx context.Context, addr string, v url.Values) (*AuthState, error) {
	client := a.Client
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	endpoint := addr
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	endpoint = strings.TrimSuffix(endpoint, "/") + "/auth"
	var req *http.Request
	var err error
	if strings.EqualFold(a.Method, http.MethodPost) {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(v.Encode()))
		if req != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"?"+v.Encode(), nil)
	}
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("auth server %s answered %s", addr, resp.Status)
	}
	var st AuthState
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("auth server %s: %w", addr, err)
	}
	st.expires = time.Now().Add(time.Duration(st.TTL) * time.Second)
	return &st, nil
}

func commonName(st *tls.ConnectionState) string {
	if st == nil || len(st.PeerCertificates) == 0 {
		return ""
	}
	return st.PeerCertificates[0].Subject.CommonName
}

// authResponse is the body of a successful AUTH's response frame.
type authResponse struct {
	Identity        string `json:"identity"`
	IdentityURL     string `json:"identity_url"`
	PermissionCount int    `json:"permission_count"`
}

func (s *session) auth(params [][]byte) error {
	if s.state.Load() != stateInit {
		return Fatal(E_INVALID, "cannot AUTH in current state")
	}
	if len(params) != 0 {
		return Fatal(E_INVALID, "AUTH invalid number of parameters")
	}
	secret, err := ReadAuthBody(s.r, s.lim.MaxBodySize)
	if err != nil {
		return err
	}
	if s.authState.Load() != nil {
		return Fatal(E_INVALID, "AUTH already set")
	}
	if s.srv.Auth == nil {
		return Fatal(E_AUTH_DISABLED, "AUTH disabled")
	}
	s.secret = string(secret)
	st, err := s.queryAuth()
	if err != nil {
		s.srv.Logger.Warn("auth server query failed", "client", s.conn.RemoteAddr().String(), "err", err)
		return Fatal(E_AUTH_FAILED, "AUTH failed")
	}
	if len(st.Authorizations) == 0 {
		return Fatal(E_UNAUTHORIZED, "AUTH no authorizations found")
	}
	s.authState.Store(st)
	body, err := json.Marshal(authResponse{Identity: st.Identity, IdentityURL: st.IdentityURL, PermissionCount: len(st.Authorizations)})
	if err != nil {
		return Fatal(E_AUTH_ERROR, "AUTH error %s", err)
	}
	s.send(&reply{frameType: FrameTypeResponse, data: body})
	return nil
}

func (s *session) queryAuth() (*AuthState, error) {
	host, _, _ := net.SplitHostPort(s.conn.RemoteAddr().String())
	return s.srv.Auth.Query(context.Background(), host, s.tlsState.Load(), s.secret)
}

// checkAuth enforces the auth server's grants on PUB, MPUB, DPUB and SUB
// when auth is enabled, asking again once the grants' TTL has passed.
func (s *session) checkAuth(cmd, permission, topic, channel string) error {
	if s.srv.Auth == nil {
		return nil
	}
	st := s.authState.Load()
	if st == nil {
		return Fatal(E_AUTH_FIRST, "AUTH required before %s", cmd)
	}
	if st.expired(time.Now()) {
		fresh, err := s.queryAuth()
		if err != nil {
			return Fatal(E_AUTH_FAILED, "AUTH failed")
		}
		s.authState.Store(fresh)
		st = fresh
	}
	if !st.Allows(permission, topic, channel) {
		return Fatal(E_UNAUTHORIZED, "AUTH failed for %s on %q %q", cmd, topic, channel)
	}
	return nil
}
