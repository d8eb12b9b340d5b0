// Package httpapi serves nsqd's HTTP API, nsqlookupd's read API for this
// node, and /metrics, translating requests into broker calls.
package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// router answers unknown paths and wrong methods as nsqd's router does:
// JSON {"message":"NOT_FOUND"} and {"message":"METHOD_NOT_ALLOWED"}.
type router struct {
	routes map[string]map[string]http.Handler
	// prefixes route every path under a prefix (nsqd's /config/:opt).
	prefixes map[string]map[string]http.Handler
}

func newRouter() *router {
	return &router{routes: make(map[string]map[string]http.Handler), prefixes: make(map[string]map[string]http.Handler)}
}

// handlePrefix routes the paths under prefix, which ends in a slash.
func (rt *router) handlePrefix(method, prefix string, h http.Handler) {
	if rt.prefixes[prefix] == nil {
		rt.prefixes[prefix] = make(map[string]http.Handler)
	}
	rt.prefixes[prefix][method] = h
}

func (rt *router) methods(path string) (map[string]http.Handler, bool) {
	if m, ok := rt.routes[path]; ok {
		return m, true
	}
	for prefix, m := range rt.prefixes {
		if len(path) > len(prefix) && strings.HasPrefix(path, prefix) {
			return m, true
		}
	}
	return nil, false
}

func (rt *router) handle(method, path string, h http.Handler) {
	if rt.routes[path] == nil {
		rt.routes[path] = make(map[string]http.Handler)
	}
	rt.routes[path][method] = h
}

func (rt *router) handleFunc(method, path string, h func(http.ResponseWriter, *http.Request)) {
	rt.handle(method, path, http.HandlerFunc(h))
}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	methods, ok := rt.methods(r.URL.Path)
	if !ok {
		writeError(w, http.StatusNotFound, "NOT_FOUND")
		return
	}
	h, ok := methods[r.Method]
	if !ok && r.Method == http.MethodHead {
		h, ok = methods[http.MethodGet]
	}
	if !ok {
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/debug/") {
		// Bounded, so an unreachable etcd fails a request instead of
		// hanging it; long enough for a forwarded publish.
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	h.ServeHTTP(w, r)
}

const requestTimeout = 10 * time.Second

const v1Header = "nsq; version=1.0"

// writeError answers nsqd's V1 error shape, byte for byte: no trailing
// newline, which clients comparing bodies would see.
func writeError(w http.ResponseWriter, status int, code string) {
	data, _ := json.Marshal(map[string]string{"message": code})
	w.Header().Set("X-NSQ-Content-Type", v1Header)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(data)
}

// writeJSON answers a V1 success with v as JSON, a string included.
func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
		return
	}
	w.Header().Set("X-NSQ-Content-Type", v1Header)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}

// writeOK answers a V1 success: nil is an empty body, a string is sent raw,
// anything else is JSON.
func writeOK(w http.ResponseWriter, v any) {
	w.Header().Set("X-NSQ-Content-Type", v1Header)
	switch b := v.(type) {
	case nil:
		w.WriteHeader(http.StatusOK)
	case string:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(b))
	default:
		data, err := json.Marshal(v)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		w.Write(data)
	}
}
