// latprobe measures each request's latency against an etcd v3 member
// through etcd's Go client (clientv3 3.4, Debian's golang-etcd-server-dev),
// for a test that compares latencies during some operation with those
// just before it.
//
//	latprobe -endpoint E -prefix P -out FILE [-keys N] [-value-size N]
//	    one connection puts P/k<i % N> and another serializably gets
//	    P/k<i % N>, each in a loop, until SIGTERM; each answer is appended
//	    to FILE as "unix-ms kind latency-us" (kind put or get), and every
//	    value got is checked to be one this probe put for that key (a
//	    value of the form P/k<j>:<seq>:filler with j == the key's index):
//	    a torn or foreign value makes it print "bad ..." and exit 1.
//	    With -rate R each connection instead sends R requests a second on
//	    a fixed schedule, whether or not the earlier ones were answered,
//	    and each latency is counted from the time the schedule gave the
//	    request (its unix-ms too): a server that stops answering for a
//	    while shows as every request due in that while being late, not as
//	    one slow request.
//
// Build: GO111MODULE=off GOPATH=/usr/share/gocode go build
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/clientv3"
)

func main() {
	ep := flag.String("endpoint", "", "client URL")
	prefix := flag.String("prefix", "lat", "key prefix")
	out := flag.String("out", "", "file for the latencies")
	keys := flag.Int("keys", 100, "keys written and read in turn")
	size := flag.Int("value-size", 256, "filler bytes per value")
	rate := flag.Int("rate", 0, "requests a second of each kind on a fixed schedule (0: each after the last)")
	flag.Parse()
	if *ep == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: latprobe -endpoint E -prefix P -out FILE")
		os.Exit(2)
	}
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	w := bufio.NewWriter(f)
	var mu sync.Mutex
	record := func(kind string, t0 time.Time) {
		d := time.Since(t0)
		mu.Lock()
		fmt.Fprintf(w, "%d %s %d\n", t0.UnixNano()/1e6, kind, d.Microseconds())
		mu.Unlock()
	}
	mk := func() *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{*ep}, DialTimeout: 5 * time.Second})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		return c
	}
	pc, gc := mk(), mk()
	stop := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; close(stop) }()
	filler := strings.Repeat("v", *size)
	bad := make(chan string, 1)
	var wg sync.WaitGroup
	// call runs one(i, key, ctx, t0) with a deadline
	call := func(one func(i int, k string, ctx context.Context, t0 time.Time), i int, t0 time.Time) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		one(i, fmt.Sprintf("%s/k%d", *prefix, i%*keys), ctx, t0)
		cancel()
	}
	// each runs call for i = 0, 1, ... until stop: one after the other,
	// or with -rate each at its time on a schedule of its own
	loop := func(one func(i int, k string, ctx context.Context, t0 time.Time)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var gap time.Duration
			if *rate > 0 {
				gap = time.Second / time.Duration(*rate)
			}
			due := time.Now()
			for i := 0; ; i++ {
				if gap > 0 {
					due = due.Add(gap)
					time.Sleep(time.Until(due))
				}
				select {
				case <-stop:
					return
				default:
				}
				if gap == 0 {
					call(one, i, time.Now())
					continue
				}
				wg.Add(1)
				go func(i int, t0 time.Time) {
					defer wg.Done()
					call(one, i, t0)
				}(i, due)
			}
		}()
	}
	loop(func(i int, k string, ctx context.Context, t0 time.Time) {
		_, err := pc.Put(ctx, k, fmt.Sprintf("%s:%d:%s", k, i, filler))
		if err != nil {
			fmt.Println("error put", err)
			return
		}
		record("put", t0)
	})
	loop(func(i int, k string, ctx context.Context, t0 time.Time) {
		r, err := gc.Get(ctx, k, clientv3.WithSerializable())
		if err != nil {
			fmt.Println("error get", err)
			return
		}
		record("get", t0)
		for _, kv := range r.Kvs {
			v := string(kv.Value)
			if string(kv.Key) != k || !strings.HasPrefix(v, k+":") || !strings.HasSuffix(v, ":"+filler) {
				select {
				case bad <- fmt.Sprintf("bad %s = %.60q", kv.Key, v):
				default:
				}
			}
		}
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	st := 0
	select {
	case <-done:
	case b := <-bad:
		fmt.Println(b)
		close(stop)
		<-done
		st = 1
	}
	mu.Lock()
	w.Flush()
	mu.Unlock()
	f.Close()
	os.Exit(st)
}
