// Command agentproxy is the only Kubernetes API endpoint an agent gets.
//
// The agent holds a per-run token that only this proxy accepts. The proxy checks it, drops any
// credentials or impersonation headers the client sent, and forwards with the conductor's
// credentials while impersonating the agent's ServiceAccount, so the agent acts with exactly that
// account's RBAC. It removes the hidden (fault-plane) namespaces from everything it returns.
//
// Secrets never appear on the command line: a JSON object {"token": ..., "upstream_token": ...}
// is read from stdin. When it listens, the proxy prints "AGENTPROXY_READY https://host:port".
package main

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, strings.Split(v, ",")...); return nil }

type secrets struct {
	Token         string `json:"token"`
	UpstreamToken string `json:"upstream_token"`
}

// servePrometheus serves the Prometheus view: no credentials are involved (the query API of the
// observability stack is open to the cluster's pods anyway), so neither TLS nor a token.
func servePrometheus(listen, upstream string, hidden []string) {
	target, err := url.Parse(upstream)
	if err != nil || target.Scheme == "" || target.Host == "" || len(hidden) == 0 {
		fail("-prometheus needs a URL and at least one -hide-namespace")
	}
	logger := log.New(os.Stderr, "agentproxy: ", log.LstdFlags)
	v := &PromView{Upstream: target, Filter: NewFilter(hidden), Sealer: NewSealer(hidden), Log: logger,
		Transport: &http.Transport{Proxy: nil, DisableCompression: true, IdleConnTimeout: 90 * time.Second}}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fail("listen on %s: %v", listen, err)
	}
	server := &http.Server{Handler: v.handler(), ReadHeaderTimeout: 30 * time.Second, ErrorLog: logger}
	fmt.Printf("AGENTPROXY_READY http://%s\n", ln.Addr().String())
	os.Stdout.Sync()
	if err := server.Serve(ln); err != nil {
		fail("%v", err)
	}
}

// upgradeSplit sends connection upgrades (exec, attach, port-forward over SPDY or WebSocket) on
// HTTP/1.1 connections of their own: an upgrade cannot ride a pooled HTTP/2 connection.
type upgradeSplit struct{ plain, upgrade http.RoundTripper }

func (u upgradeSplit) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Upgrade") != "" {
		return u.upgrade.RoundTrip(r)
	}
	return u.plain.RoundTrip(r)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "agentproxy: "+format+"\n", args...)
	os.Exit(2)
}

// exitWithParent ends the proxy when its launcher is gone (a SIGKILLed conductor or test never
// stops it, and it belongs to no journaled run that cleanup could find). Polling the parent PID
// works whatever thread started us, unlike PR_SET_PDEATHSIG, which fires when that thread ends.
func exitWithParent(parent int) {
	for {
		if os.Getppid() != parent {
			os.Exit(0)
		}
		time.Sleep(time.Second)
	}
}

func main() {
	var hidden, groups listFlag
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on (port 0: any free port)")
	certFile := flag.String("tls-cert", "", "serving certificate (PEM)")
	keyFile := flag.String("tls-key", "", "serving key (PEM)")
	upstream := flag.String("upstream", "", "the API server URL")
	upstreamCA := flag.String("upstream-ca", "", "CA bundle of the API server (PEM)")
	upstreamCert := flag.String("upstream-cert", "", "client certificate for the API server (PEM)")
	upstreamKey := flag.String("upstream-key", "", "client key for the API server (PEM)")
	insecure := flag.Bool("upstream-insecure", false, "do not verify the API server's certificate")
	user := flag.String("as-user", "", "the identity the agent acts as (Impersonate-User)")
	flag.Var(&groups, "as-group", "a group of that identity (repeatable)")
	flag.Var(&hidden, "hide-namespace", "a namespace the agent must not see (repeatable)")
	prometheus := flag.String("prometheus", "", "serve the agent's view of this Prometheus (plain HTTP) instead")
	parent := flag.Int("exit-with-parent", 0, "exit once this process (the launcher) is no longer the parent")
	flag.Parse()
	if *parent > 0 {
		go exitWithParent(*parent)
	}
	if *prometheus != "" {
		servePrometheus(*listen, *prometheus, hidden)
		return
	}
	if *upstream == "" || *user == "" || len(hidden) == 0 || *certFile == "" || *keyFile == "" {
		fail("-upstream, -as-user, -hide-namespace, -tls-cert and -tls-key are required")
	}
	var sec secrets
	if err := json.NewDecoder(os.Stdin).Decode(&sec); err != nil || len(sec.Token) < 16 {
		fail("stdin must hold {\"token\": <at least 16 characters>, \"upstream_token\": ...}")
	}
	target, err := url.Parse(*upstream)
	if err != nil || target.Scheme == "" || target.Host == "" {
		fail("bad -upstream %q", *upstream)
	}
	tlsUp := &tls.Config{InsecureSkipVerify: *insecure} //nolint:gosec // only when the admin kubeconfig says so
	if *upstreamCA != "" {
		pem, err := os.ReadFile(*upstreamCA)
		if err != nil {
			fail("%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			fail("no certificate in %s", *upstreamCA)
		}
		tlsUp.RootCAs = pool
	}
	if *upstreamCert != "" {
		pair, err := tls.LoadX509KeyPair(*upstreamCert, *upstreamKey)
		if err != nil {
			fail("client certificate: %v", err)
		}
		tlsUp.Certificates = []tls.Certificate{pair}
	}
	transport := func(h2 bool) *http.Transport {
		t := &http.Transport{
			Proxy:               nil, // straight to the API server, whatever the environment says
			TLSClientConfig:     tlsUp.Clone(),
			ForceAttemptHTTP2:   h2,
			DisableCompression:  true,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
		}
		if !h2 {
			t.TLSClientConfig.NextProtos = []string{"http/1.1"}
		}
		return t
	}
	aliases := map[string]string{}
	for _, ns := range hidden {
		suffix := make([]byte, 6)
		_, _ = rand.Read(suffix)
		aliases[ns] = ns + "-" + hex.EncodeToString(suffix)
	}
	p := &Proxy{
		Token:         sec.Token,
		Identity:      Identity{User: *user, Groups: groups},
		Filter:        NewFilter(hidden),
		Aliases:       aliases,
		Upstream:      target,
		UpstreamToken: sec.UpstreamToken,
		Transport:     upgradeSplit{plain: transport(true), upgrade: transport(false)},
		Log:           log.New(os.Stderr, "agentproxy: ", log.LstdFlags),
	}
	serving, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		fail("serving certificate: %v", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fail("listen on %s: %v", *listen, err)
	}
	server := &http.Server{
		Handler:           p.handler(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          p.Log,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{serving}, MinVersion: tls.VersionTLS12},
	}
	fmt.Printf("AGENTPROXY_READY https://%s\n", ln.Addr().String())
	os.Stdout.Sync()
	if err := server.ServeTLS(ln, "", ""); err != nil {
		fail("%v", err)
	}
}
