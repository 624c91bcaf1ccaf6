// httpecho: a tiny HTTP server for cluster tests. With -hog-mb N it allocates and touches N MiB
// and keeps it, so a pod with a lower memory limit is OOM-killed by the kernel.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	addr := flag.String("listen", ":8080", "address to listen on")
	hog := flag.Int("hog-mb", 0, "MiB of memory to allocate and touch at start")
	get := flag.String("get", "", "fetch this URL, print the body and exit (a client, not a server)")
	flag.Parse()
	if *get != "" {
		client := http.Client{Timeout: 5 * time.Second}
		resp, err := client.Get(*get)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Print(string(body))
		if resp.StatusCode != 200 {
			os.Exit(1)
		}
		return
	}
	if *hog > 0 {
		block := make([][]byte, 0, *hog)
		for i := 0; i < *hog; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(j)
			}
			block = append(block, b)
		}
		fmt.Println("holding", len(block), "MiB")
		for {
			time.Sleep(time.Hour)
		}
	}
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", host)
	})
	if err := http.ListenAndServe(*addr, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
