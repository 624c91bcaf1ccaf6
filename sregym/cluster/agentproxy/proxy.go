package main

// The HTTP side: authenticate the agent by its per-run token, pin its identity by impersonation,
// route the hidden namespaces to a namespace that does not exist, force JSON, and filter bodies.

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strings"
)

// Identity is who the API server is told the agent is.
type Identity struct {
	User   string
	Groups []string
}

// Proxy is the agent's API endpoint.
type Proxy struct {
	Token    string
	Identity Identity
	Filter   *Filter
	// Aliases maps each hidden namespace to a name that does not exist: requests for a hidden
	// namespace go there, so the API server itself answers as it does for any missing namespace.
	Aliases  map[string]string
	Upstream *url.URL
	// UpstreamToken, when set, is the conductor's bearer token (otherwise its client certificate
	// in the transport authenticates).
	UpstreamToken string
	Transport     http.RoundTripper
	Log           *log.Logger

	rp *httputil.ReverseProxy
}

type ctxKey struct{}

// requestInfo travels from the director to ModifyResponse.
type requestInfo struct {
	aliased           bool
	namespaces        bool // the namespaces collection
	watch             bool
	api               bool // under /api or /apis: bodies are filtered
	subresourceStream bool
}

func (p *Proxy) handler() http.Handler {
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      p.Transport,
		ModifyResponse: p.modifyResponse,
		FlushInterval:  -1, // watch and log streams reach the agent as they come
		ErrorLog:       p.Log,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.Log.Printf("upstream error for %s %s: %v", r.Method, r.URL.Path, err)
			status(w, http.StatusBadGateway, "ServiceUnavailable", "the API proxy could not serve this request")
		},
	}
	return http.HandlerFunc(p.serve)
}

// status writes a Kubernetes Status object, the form every client understands.
func status(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": message, "reason": reason, "code": code})
}

func (p *Proxy) authorized(r *http.Request) bool {
	got := r.Header.Get("Authorization")
	want := "Bearer " + p.Token
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func segments(p string) []string { return strings.Split(strings.Trim(p, "/"), "/") }

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(r) {
		status(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
		return
	}
	// Only a clean, unambiguous path is judged and forwarded: what is checked is what is sent.
	trailing := len(r.URL.Path) > 1 && strings.HasSuffix(r.URL.Path, "/")
	if r.URL.RawPath != "" && r.URL.RawPath != r.URL.Path ||
		path.Clean("/"+r.URL.Path) != strings.TrimSuffix(r.URL.Path, "/") && r.URL.Path != "/" {
		status(w, http.StatusBadRequest, "BadRequest", "the request path must be in canonical form")
		return
	}
	segs := segments(r.URL.Path)
	info := &requestInfo{api: len(segs) > 0 && (segs[0] == "api" || segs[0] == "apis")}
	for i := 0; i+1 < len(segs); i++ {
		// the kubelet's own API lists every pod of the node, hidden ones included
		if segs[i] == "nodes" && i+2 < len(segs) && segs[i+2] == "proxy" {
			status(w, http.StatusForbidden, "Forbidden", "the node proxy is not available")
			return
		}
		if segs[i] == "namespaces" && p.Filter.Hidden[segs[i+1]] {
			segs[i+1] = p.Aliases[segs[i+1]]
			info.aliased = true
		}
	}
	last := segs[len(segs)-1]
	info.namespaces = last == "namespaces" || (len(segs) >= 2 && segs[len(segs)-2] == "namespaces" && !info.aliased)
	q := r.URL.Query()
	info.watch = q.Get("watch") == "true" || q.Get("watch") == "1" || contains(segs, "watch")
	info.subresourceStream = info.api && streamingSubresource(segs)
	if info.api && !info.subresourceStream {
		// No chunked lists: a continue token is the storage key of the page's last object, which
		// may be a hidden one (base64 of "node-ops/<pod>"). Whole lists carry no token.
		q.Del("limit")
		q.Del("continue")
		if strings.Contains(r.Header.Get("Accept"), "as=Table") {
			// full objects in rows: the filter judges each row by its namespace and, for events,
			// by what they are about
			q.Set("includeObject", "Object")
		}
		r.Header.Set("Accept", jsonAccept(r.Header.Get("Accept")))
	}
	r.URL.Path = "/" + strings.Join(segs, "/")
	if trailing { // /version/ is what some clients ask for
		r.URL.Path += "/"
	}
	r.URL.RawPath = ""
	r.URL.RawQuery = q.Encode()
	r.RequestURI = ""
	r = r.WithContext(contextWith(r.Context(), info))
	p.rp.ServeHTTP(w, r)
}

// streamingSubresource reports whether an API path names a subresource whose body is not an API
// object (logs, exec, attach, port-forward, proxied content): /api/v1[/namespaces/NS]/RES/NAME/SUB
// or /apis/GROUP/VERSION[/namespaces/NS]/RES/NAME/SUB.
func streamingSubresource(segs []string) bool {
	base := 2
	if segs[0] == "apis" {
		base = 3
	}
	if len(segs) <= base {
		return false
	}
	rest := segs[base:]
	if rest[0] == "watch" {
		rest = rest[1:]
	}
	if len(rest) > 2 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	if len(rest) < 3 {
		return false
	}
	switch rest[2] {
	case "log", "exec", "attach", "portforward", "proxy":
		return true
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// jsonAccept keeps only JSON media types (Table, discovery and metadata variants included), so
// protobuf and CBOR, which the filter cannot read, are never negotiated.
func jsonAccept(accept string) string {
	var kept []string
	for _, part := range strings.Split(accept, ",") {
		mt := strings.TrimSpace(part)
		base := strings.ToLower(strings.TrimSpace(strings.SplitN(mt, ";", 2)[0]))
		if base == "application/json" {
			kept = append(kept, mt)
		}
	}
	if len(kept) == 0 {
		return "application/json"
	}
	// a plain JSON fallback lets the server answer when it lacks the variant asked for
	if !contains(kept, "application/json") {
		kept = append(kept, "application/json")
	}
	return strings.Join(kept, ", ")
}

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(p.Upstream)
	pr.Out.URL.Path = pr.In.URL.Path // SetURL joins paths; the upstream has none of its own
	pr.Out.URL.RawPath = ""
	h := pr.Out.Header
	for k := range h {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "impersonate-") || strings.HasPrefix(lk, "x-remote-") || lk == "authorization" {
			h.Del(k)
		}
	}
	h.Del("Accept-Encoding") // bodies must be readable to be filtered
	if p.UpstreamToken != "" {
		h.Set("Authorization", "Bearer "+p.UpstreamToken)
	}
	h.Set("Impersonate-User", p.Identity.User)
	for _, g := range p.Identity.Groups {
		h.Add("Impersonate-Group", g)
	}
	// ReverseProxy adds X-Forwarded-For only when asked; the API server needs none of it.
}

func (p *Proxy) modifyResponse(resp *http.Response) error {
	info, _ := resp.Request.Context().Value(ctxKey{}).(*requestInfo)
	if info == nil || !info.api || resp.StatusCode == http.StatusSwitchingProtocols ||
		resp.StatusCode == http.StatusNotModified {
		return nil
	}
	if info.subresourceStream {
		if info.aliased {
			// nothing exists there; whatever came back must not name the alias
			return p.bufferAndRewrite(resp, nil)
		}
		return nil
	}
	ct := strings.ToLower(resp.Header.Get("Content-Type"))
	if !strings.HasPrefix(ct, "application/json") {
		resp.Body.Close()
		return fmt.Errorf("refusing a %q body for %s: only JSON can be filtered", ct, resp.Request.URL.Path)
	}
	if info.watch && resp.StatusCode == http.StatusOK {
		p.filterStream(resp, info)
		return nil
	}
	return p.bufferAndRewrite(resp, info)
}

// bufferAndRewrite filters a whole JSON body (info nil: only replaces the alias).
func (p *Proxy) bufferAndRewrite(resp *http.Response, info *requestInfo) error {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if info != nil && len(bytes.TrimSpace(body)) > 0 {
		obj, err := decode(json.NewDecoder(bytes.NewReader(body)))
		if err != nil {
			return fmt.Errorf("unreadable JSON from the API server for %s: %w", resp.Request.URL.Path, err)
		}
		if p.Filter.Clean(obj, info.namespaces) {
			body, _ = json.Marshal(map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
				"status": "Failure", "message": "not found", "reason": "NotFound", "code": 404})
			resp.StatusCode = http.StatusNotFound
			resp.Status = "404 Not Found"
		} else if body, err = json.Marshal(obj); err != nil {
			return err
		}
	}
	if info == nil || info.aliased {
		for ns, alias := range p.Aliases {
			body = bytes.ReplaceAll(body, []byte(alias), []byte(ns))
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", fmt.Sprint(len(body)))
	resp.Header.Del("Content-Encoding")
	return nil
}

// filterStream passes a watch stream event by event, dropping hidden ones.
func (p *Proxy) filterStream(resp *http.Response, info *requestInfo) {
	upstream := resp.Body
	pr, pw := io.Pipe()
	go func() {
		defer upstream.Close()
		dec := json.NewDecoder(upstream)
		dec.UseNumber()
		for {
			var ev map[string]any
			if err := dec.Decode(&ev); err != nil {
				if err == io.EOF {
					err = nil
				}
				pw.CloseWithError(err)
				return
			}
			if p.Filter.CleanEvent(ev, info.namespaces) {
				continue
			}
			line, err := json.Marshal(ev)
			if err == nil {
				_, err = pw.Write(append(line, '\n'))
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	resp.Body = pr
	resp.ContentLength = -1 // unknown length: ReverseProxy flushes each write
	resp.Header.Del("Content-Length")
}

func contextWith(ctx context.Context, info *requestInfo) context.Context {
	return context.WithValue(ctx, ctxKey{}, info)
}
