package main

import (
	"bufio"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
)

const token = "agent-token-0123456789"

// upstream is a fake API server: it records what it was sent and answers with a canned body.
type upstream struct {
	got  *http.Request
	body string
	ct   string
	code int
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.got = r.Clone(r.Context())
	ct := u.ct
	if ct == "" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	if u.code != 0 {
		w.WriteHeader(u.code)
	}
	io.WriteString(w, u.body)
}

func start(t *testing.T, up *upstream) *httptest.Server {
	t.Helper()
	api := httptest.NewServer(up)
	t.Cleanup(api.Close)
	target, _ := url.Parse(api.URL)
	p := &Proxy{Token: token, Identity: Identity{User: "system:serviceaccount:shop:sre-oncall",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"}},
		Filter: NewFilter([]string{"node-ops"}), Aliases: map[string]string{"node-ops": "node-ops-abc123"},
		Upstream: target, UpstreamToken: "admin-token", Transport: &http.Transport{DisableCompression: true},
		Log: log.New(os.Stderr, "test: ", 0)}
	srv := httptest.NewServer(p.handler())
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, srv *httptest.Server, path string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestRefusesAnyOtherCredential(t *testing.T) {
	srv := start(t, &upstream{body: `{}`})
	for _, auth := range []string{"", "Bearer admin-token", "Bearer " + token + "x", "Basic " + token} {
		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/pods", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("Authorization %q: got %d, want 401", auth, resp.StatusCode)
		}
	}
}

func TestForwardsAsTheAgentOnlyWhateverTheClientClaims(t *testing.T) {
	up := &upstream{body: `{"kind":"PodList","items":[]}`}
	srv := start(t, up)
	get(t, srv, "/api/v1/pods", map[string]string{"Impersonate-User": "system:admin",
		"Impersonate-Group": "system:masters", "Impersonate-Uid": "0", "Impersonate-Extra-Scopes": "x",
		"X-Remote-User": "admin", "Accept-Encoding": "gzip"})
	h := up.got.Header
	if got := h.Values("Impersonate-User"); len(got) != 1 || got[0] != "system:serviceaccount:shop:sre-oncall" {
		t.Errorf("Impersonate-User = %v", got)
	}
	groups := h.Values("Impersonate-Group")
	if len(groups) != 3 || contains(groups, "system:masters") {
		t.Errorf("Impersonate-Group = %v", groups)
	}
	for _, k := range []string{"Impersonate-Uid", "Impersonate-Extra-Scopes", "X-Remote-User", "Accept-Encoding"} {
		if h.Get(k) != "" {
			t.Errorf("%s reached the API server: %q", k, h.Get(k))
		}
	}
	if h.Get("Authorization") != "Bearer admin-token" {
		t.Errorf("Authorization = %q, want the conductor's", h.Get("Authorization"))
	}
}

func TestHiddenNamespaceIsAMissingNamespace(t *testing.T) {
	up := &upstream{code: 404, body: `{"kind":"Status","apiVersion":"v1","status":"Failure",` +
		`"message":"namespaces \"node-ops-abc123\" not found","reason":"NotFound","code":404}`}
	srv := start(t, up)
	for _, path := range []string{"/api/v1/namespaces/node-ops", "/api/v1/namespaces/node-ops/pods",
		"/api/v1/namespaces/node-ops/pods/x/log", "/apis/apps/v1/namespaces/node-ops/deployments",
		"/api/v1/watch/namespaces/node-ops/pods"} {
		resp, body := get(t, srv, path, nil)
		if !strings.Contains(up.got.URL.Path, "/node-ops-abc123") || strings.Contains(up.got.URL.Path, "/node-ops/") {
			t.Errorf("%s forwarded as %s", path, up.got.URL.Path)
		}
		if resp.StatusCode != 404 || strings.Contains(body, "abc123") || !strings.Contains(body, `namespaces \"node-ops\" not found`) {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
}

func TestNonCanonicalPathsAndTheNodeProxyAreRefused(t *testing.T) {
	up := &upstream{body: `{}`}
	srv := start(t, up)
	for _, path := range []string{"/api/v1/namespaces/x/../node-ops/pods", "/api/v1//namespaces/node-ops/pods",
		"/api/v1/namespaces/node%2Dops/pods%2Fx", "/api/v1/nodes/n1/proxy/pods"} {
		up.got = nil
		resp, _ := get(t, srv, path, nil)
		if resp.StatusCode < 400 || up.got != nil && strings.Contains(up.got.URL.Path, "node-ops") {
			t.Errorf("%s: %d, forwarded %v", path, resp.StatusCode, up.got)
		}
	}
}

func TestATrailingSlashIsKept(t *testing.T) {
	up := &upstream{body: `{"major":"1"}`}
	srv := start(t, up)
	if resp, _ := get(t, srv, "/version/", nil); resp.StatusCode != 200 || up.got.URL.Path != "/version/" {
		t.Errorf("%d %v", resp.StatusCode, up.got)
	}
}

func TestAcceptIsForcedToJSON(t *testing.T) {
	up := &upstream{body: `{"kind":"PodList","items":[]}`}
	srv := start(t, up)
	get(t, srv, "/api/v1/pods", map[string]string{"Accept": "application/vnd.kubernetes.protobuf, application/json"})
	if a := up.got.Header.Get("Accept"); a != "application/json" {
		t.Errorf("Accept = %q", a)
	}
	get(t, srv, "/api/v1/pods", map[string]string{"Accept": "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io,application/json"})
	if a := up.got.Header.Get("Accept"); strings.Contains(a, "protobuf") || !strings.Contains(a, "as=Table") {
		t.Errorf("Accept = %q", a)
	}
	if up.got.URL.Query().Get("includeObject") != "Object" {
		t.Errorf("a Table request must carry whole objects: %s", up.got.URL.RawQuery)
	}
	up.ct = "application/vnd.kubernetes.protobuf"
	if resp, _ := get(t, srv, "/api/v1/pods", nil); resp.StatusCode != 502 {
		t.Errorf("a body the filter cannot read passed: %d", resp.StatusCode)
	}
}

const podList = `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","remainingItemCount":3},"items":[
 {"metadata":{"name":"web-1","namespace":"shop"}},
 {"metadata":{"name":"injector-x","namespace":"node-ops"}}]}`

func TestListsLoseHiddenItems(t *testing.T) {
	srv := start(t, &upstream{body: podList})
	_, body := get(t, srv, "/api/v1/pods", nil)
	if strings.Contains(body, "node-ops") || strings.Contains(body, "injector-x") || !strings.Contains(body, "web-1") {
		t.Errorf("body %s", body)
	}
	if strings.Contains(body, "remainingItemCount") {
		t.Errorf("the count betrays hidden items: %s", body)
	}
	if !strings.Contains(body, `"resourceVersion":"9"`) {
		t.Errorf("metadata lost: %s", body)
	}
}

func TestNamespaceListAndTable(t *testing.T) {
	ns := `{"kind":"Table","apiVersion":"meta.k8s.io/v1","columnDefinitions":[{"name":"Name"}],"rows":[
	 {"cells":["default"],"object":{"kind":"Namespace","metadata":{"name":"default"}}},
	 {"cells":["node-ops"],"object":{"kind":"Namespace","metadata":{"name":"node-ops"}}},
	 {"cells":["no-object"]}]}`
	srv := start(t, &upstream{body: ns})
	_, body := get(t, srv, "/api/v1/namespaces", map[string]string{"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
	if strings.Contains(body, "node-ops") || strings.Contains(body, "no-object") || !strings.Contains(body, "default") {
		t.Errorf("body %s", body)
	}
}

func TestEventsAboutTheHiddenNamespaceAreDropped(t *testing.T) {
	events := `{"kind":"EventList","items":[
	 {"kind":"Event","metadata":{"name":"a","namespace":"default"},"involvedObject":{"kind":"Node","name":"n1"},"message":"ok"},
	 {"kind":"Event","metadata":{"name":"b","namespace":"default"},"involvedObject":{"kind":"Pod","namespace":"node-ops","name":"x"}},
	 {"kind":"Event","metadata":{"name":"c","namespace":"default"},"involvedObject":{"kind":"Node","name":"n1"},"message":"evicting pod node-ops/x"},
	 {"kind":"Event","apiVersion":"events.k8s.io/v1","metadata":{"name":"d","namespace":"default"},"regarding":{"kind":"Namespace","name":"node-ops"}}]}`
	srv := start(t, &upstream{body: events})
	_, body := get(t, srv, "/api/v1/events", nil)
	var list struct{ Items []map[string]any }
	json.Unmarshal([]byte(body), &list)
	if len(list.Items) != 1 || strings.Contains(body, "node-ops") {
		t.Errorf("body %s", body)
	}
}

func TestWatchStreamsDropHiddenEvents(t *testing.T) {
	stream := `{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"web-1","namespace":"shop"}}}
{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"injector-x","namespace":"node-ops"}}}
{"type":"MODIFIED","object":{"kind":"Table","rows":[{"cells":["injector-x"],"object":{"metadata":{"name":"injector-x","namespace":"node-ops"}}}]}}
{"type":"MODIFIED","object":{"kind":"Table","rows":[{"cells":["web-1"],"object":{"metadata":{"name":"web-1","namespace":"shop"}}}]}}
{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"12"}}}
`
	srv := start(t, &upstream{body: stream})
	resp, body := get(t, srv, "/api/v1/pods?watch=true", nil)
	if resp.StatusCode != 200 || strings.Contains(body, "node-ops") || strings.Contains(body, "injector") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	n := 0
	for sc := bufio.NewScanner(strings.NewReader(body)); sc.Scan(); n++ {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %d is not an event: %v", n, err)
		}
	}
	if n != 3 {
		t.Errorf("%d events passed, want 3: %s", n, body)
	}
}

func TestPersistentVolumesOfHiddenClaimsAreDropped(t *testing.T) {
	pvs := `{"kind":"PersistentVolumeList","items":[
	 {"kind":"PersistentVolume","metadata":{"name":"pv-a"},"spec":{"claimRef":{"namespace":"shop","name":"data"}}},
	 {"kind":"PersistentVolume","metadata":{"name":"pv-b"},"spec":{"claimRef":{"namespace":"node-ops","name":"scratch"}}}]}`
	srv := start(t, &upstream{body: pvs})
	_, body := get(t, srv, "/api/v1/persistentvolumes", nil)
	if strings.Contains(body, "pv-b") || !strings.Contains(body, "pv-a") {
		t.Errorf("body %s", body)
	}
}

func TestLogsStreamUntouched(t *testing.T) {
	srv := start(t, &upstream{body: "line mentioning node-ops/x\n", ct: "text/plain"})
	resp, body := get(t, srv, "/api/v1/namespaces/shop/pods/web-1/log?follow=true", nil)
	if resp.StatusCode != 200 || body != "line mentioning node-ops/x\n" {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
}

func TestJSONAccept(t *testing.T) {
	cases := map[string]string{
		"":                 "application/json",
		"*/*":              "application/json",
		"application/cbor": "application/json",
		"application/json;as=Table;v=v1;g=meta.k8s.io": "application/json;as=Table;v=v1;g=meta.k8s.io, application/json",
	}
	for in, want := range cases {
		if got := jsonAccept(in); got != want {
			t.Errorf("jsonAccept(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestListsAreNeverChunked(t *testing.T) {
	up := &upstream{body: podList}
	srv := start(t, up)
	get(t, srv, "/api/v1/pods?limit=1&continue=abc&labelSelector=app%3Dweb", nil)
	q := up.got.URL.Query()
	if q.Has("limit") || q.Has("continue") || q.Get("labelSelector") != "app=web" {
		t.Errorf("forwarded query %q", up.got.URL.RawQuery)
	}
}

func TestNotModifiedDiscoveryPasses(t *testing.T) {
	srv := start(t, &upstream{code: 304, ct: " "})
	if resp, _ := get(t, srv, "/apis", map[string]string{"If-None-Match": `"abc"`}); resp.StatusCode != 304 {
		t.Errorf("a cached discovery answer was refused: %d", resp.StatusCode)
	}
}

func TestEventTablesAreJudgedByWhatTheEventIsAbout(t *testing.T) {
	table := `{"kind":"Table","apiVersion":"meta.k8s.io/v1","rows":[
	 {"cells":["Scheduled"],"object":{"kind":"Event","metadata":{"name":"a","namespace":"shop"},"involvedObject":{"kind":"Pod","namespace":"shop","name":"web-1"}}},
	 {"cells":["Killing"],"object":{"kind":"Event","metadata":{"name":"b","namespace":"default"},"involvedObject":{"kind":"Pod","namespace":"node-ops","name":"x"}}}]}`
	up := &upstream{body: table}
	srv := start(t, up)
	_, body := get(t, srv, "/api/v1/events", map[string]string{"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
	if strings.Contains(body, "node-ops") || strings.Contains(body, "Killing") || !strings.Contains(body, "Scheduled") {
		t.Errorf("body %s", body)
	}
}

func TestStreamingSubresources(t *testing.T) {
	cases := map[string]bool{
		"/api/v1/namespaces/shop/pods/web/log":            true,
		"/api/v1/namespaces/shop/pods/web/exec":           true,
		"/api/v1/namespaces/shop/services/web:80/proxy/x": true,
		"/api/v1/namespaces/log":                          false,
		"/api/v1/namespaces/proxy/pods":                   false,
		"/api/v1/namespaces/shop/pods/proxy":              false,
		"/api/v1/pods":                                    false,
		"/apis/apps/v1/namespaces/shop/deployments/web":   false,
		"/api/v1/namespaces/shop/status":                  false,
	}
	for p, want := range cases {
		if got := streamingSubresource(segments(p)); got != want {
			t.Errorf("%s: %v, want %v", p, got, want)
		}
	}
}
