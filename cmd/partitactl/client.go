package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// client asks a cluster's nodes over their HTTP API. Any node answers for
// the whole cluster, so a node that does not answer is skipped for the
// next one listed.
type client struct {
	nodes []string // host:port, tried in order
	token string   // the nodes' --http-admin-token, if any
	http  *http.Client
}

// newClient asks the nodes listed, in order, dialling from local when set
// and sending token as a bearer token when set.
func newClient(nodes []string, local *net.TCPAddr, token string, timeout time.Duration) *client {
	dialer := &net.Dialer{Timeout: timeout}
	if local != nil {
		dialer.LocalAddr = local
	}
	tr := &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 2}
	return &client{nodes: nodes, token: token, http: &http.Client{Transport: tr, Timeout: timeout}}
}

// errNoAnswer heads the errors of a request no node answered.
var errNoAnswer = errors.New("no node answered")

// get decodes the JSON a node answers to GET path into v.
func (c *client) get(ctx context.Context, path string, q url.Values, v any) error {
	body, err := c.do(ctx, http.MethodGet, path, q)
	if err != nil {
		return err
	}
	return decode(body, v)
}

// post asks a node to change something; the answer's body, if any.
func (c *client) post(ctx context.Context, path string, q url.Values) ([]byte, error) {
	return c.do(ctx, http.MethodPost, path, q)
}

// do sends one request to the first node that answers at all. A refusal
// is the cluster's answer and is not asked again elsewhere.
func (c *client) do(ctx context.Context, method, path string, q url.Values) ([]byte, error) {
	var errs []error
	for _, n := range c.nodes {
		body, err := c.doOn(ctx, n, method, path, q)
		var r *refusal
		if err == nil || errors.As(err, &r) || ctx.Err() != nil {
			return body, err
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(append([]error{errNoAnswer}, errs...)...)
}

// doOn sends one request to the node at hostport.
func (c *client) doOn(ctx context.Context, hostport, method, path string, q url.Values) ([]byte, error) {
	u := url.URL{Scheme: "http", Host: hostport, Path: path, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	return answer(resp, hostport)
}

// answer is a response's body, or the refusal it carries.
func answer(resp *http.Response, hostport string) ([]byte, error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	switch {
	case err != nil:
		return nil, err
	case resp.StatusCode != http.StatusOK:
		return nil, &refusal{Status: resp.StatusCode, Message: refusalText(body), Node: hostport}
	}
	return body, nil
}

// maxAnswer bounds what is read of an answer: /metrics of a node with
// many partitions is the largest.
const maxAnswer = 256 << 20
