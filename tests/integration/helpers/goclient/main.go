// goclient URL N [PARALLEL]: N HTTP GETs of URL?r=I, each on a new connection, from
// PARALLEL goroutines (default 1); exits 1 on any failure or wrong body.  Built
// with CGO_ENABLED=0 by the tests: a static Go program, which no preload reaches.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: goclient URL N [PARALLEL]")
		os.Exit(2)
	}
	url := os.Args[1]
	n, _ := strconv.Atoi(os.Args[2])
	par := 1
	if len(os.Args) > 3 {
		par, _ = strconv.Atoi(os.Args[3])
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	next := make(chan int, n)
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				u := url + "?r=" + strconv.Itoa(i)
				resp, err := client.Get(u)
				ok := err == nil
				if ok {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					ok = strings.HasPrefix(string(body), "hello ")
				}
				if !ok {
					mu.Lock()
					failed++
					mu.Unlock()
					fmt.Fprintln(os.Stderr, "failed:", u, err)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("done %d %d\n", n-failed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}
