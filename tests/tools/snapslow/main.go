// snapslow takes a snapshot through etcd's Go client (clientv3
// Maintenance.Snapshot, as `etcdctl snapshot save` does) and reads it
// slowly, so that the server's stream waits on HTTP/2 flow control, while
// a second connection times serializable gets against the same server.
//
//	snapslow -endpoint E -out FILE [-puts N] [-value-size S]
//	         [-chunk B] [-delay D] [-cpu-pid P]
//
// It first puts N keys big/NNNNN of S bytes each (so the db outgrows the
// client's flow-control windows), then reads the snapshot B bytes at a
// time with D between reads into FILE, and checks the SHA-256 the server
// sends last against the bytes before it. It prints "name value" lines:
// snapshot-bytes, read-ms, gets, get-p50-ms, get-max-ms, sha ok|bad,
// gets-by-quarter (four counts: the gets answered while the reader held
// less than a quarter of the snapshot's bytes, a half, three quarters,
// and the rest, so a server that answers gets only behind the stream
// shows up whatever the machine's speed), and with -cpu-pid
// server-cpu-ms: the CPU time process P (the server) used while the
// snapshot was read. Exits 1 on any error or a bad checksum.
//
// Build: GO111MODULE=off GOPATH=/usr/share/gocode go build
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"io/ioutil"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/clientv3"
)

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "snapslow: "+format+"\n", a...)
	os.Exit(1)
}

func client(ep string) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{ep}, DialTimeout: 5 * time.Second,
	})
	if err != nil {
		fail("dial %s: %v", ep, err)
	}
	return cli
}

// cpuMs is the user and system CPU time of process pid, in ms (USER_HZ
// is 100 on Linux).
func cpuMs(pid int) int64 {
	b, err := ioutil.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		fail("%v", err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return (u + s) * 10
}

func main() {
	ep := flag.String("endpoint", "", "client endpoint")
	out := flag.String("out", "", "where the snapshot goes")
	puts := flag.Int("puts", 400, "keys to put first")
	size := flag.Int("value-size", 64<<10, "bytes per value")
	chunk := flag.Int("chunk", 64<<10, "bytes per read of the snapshot")
	delay := flag.Duration("delay", 10*time.Millisecond, "pause between reads")
	cpuPid := flag.Int("cpu-pid", 0, "server process whose CPU time to report")
	flag.Parse()
	if *ep == "" || *out == "" {
		fail("usage: snapslow -endpoint E -out FILE [-puts N] [-value-size S] [-chunk B] [-delay D]")
	}
	cli := client(*ep)
	defer cli.Close()
	getter := client(*ep)
	defer getter.Close()

	val := string(bytes.Repeat([]byte("v"), *size))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < *puts; i += 8 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := cli.Put(ctx, fmt.Sprintf("big/%05d", i), val)
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	select {
	case err := <-errs:
		fail("put: %v", err)
	default:
	}

	rc, err := cli.Snapshot(context.Background())
	if err != nil {
		fail("snapshot: %v", err)
	}
	done := make(chan error, 1)
	var data []byte
	var got int64 // bytes read so far (the reader stores, the getter loads)
	start := time.Now()
	cpu0 := int64(0)
	if *cpuPid > 0 {
		cpu0 = cpuMs(*cpuPid)
	}
	go func() {
		buf := make([]byte, *chunk)
		for {
			n, err := io.ReadFull(rc, buf)
			data = append(data, buf[:n]...)
			atomic.StoreInt64(&got, int64(len(data)))
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				done <- nil
				return
			}
			if err != nil {
				done <- err
				return
			}
			time.Sleep(*delay)
		}
	}()
	var took []time.Duration
	var gotAt []int64 // bytes read when each get was answered
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				fail("reading the snapshot: %v", err)
			}
			finished = true
		case <-time.After(20 * time.Millisecond):
			t0 := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := getter.Get(ctx, "big/00001", clientv3.WithSerializable())
			cancel()
			if err != nil {
				fail("get during the snapshot: %v", err)
			}
			took = append(took, time.Since(t0))
			gotAt = append(gotAt, atomic.LoadInt64(&got))
		}
	}
	readMs := time.Since(start).Milliseconds()
	if *cpuPid > 0 {
		fmt.Printf("server-cpu-ms %d\n", cpuMs(*cpuPid)-cpu0)
	}
	rc.Close()
	if err := ioutil.WriteFile(*out, data, 0600); err != nil {
		fail("%v", err)
	}
	sha := "bad"
	if len(data) > sha256.Size {
		sum := sha256.Sum256(data[:len(data)-sha256.Size])
		if bytes.Equal(sum[:], data[len(data)-sha256.Size:]) {
			sha = "ok"
		}
	}
	var quarter [4]int
	for _, g := range gotAt {
		q := int(g * 4 / int64(len(data)+1))
		quarter[q]++
	}
	fmt.Printf("gets-by-quarter %d %d %d %d\n", quarter[0], quarter[1], quarter[2], quarter[3])
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	p50, max := time.Duration(0), time.Duration(0)
	if len(took) > 0 {
		p50, max = took[len(took)/2], took[len(took)-1]
	}
	fmt.Printf("snapshot-bytes %d\nread-ms %d\ngets %d\nget-p50-ms %d\nget-max-ms %d\nsha %s\n",
		len(data), readMs, len(took), p50.Milliseconds(), max.Milliseconds(), sha)
	if sha != "ok" {
		os.Exit(1)
	}
}
