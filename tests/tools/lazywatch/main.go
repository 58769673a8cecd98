// lazywatch: a Watch client that reads what the server sends but never
// gives HTTP/2 window back, spoken frame by frame. Some clients give
// window back lazily; a server that holds events until its client has
// read enough must still deliver them. The tool opens one watch on a
// key, then puts -puts values of -value-size bytes on that key through
// a separate connection (clientv3), one at a time, and waits up to
// -wait for each put's event. It prints "got N" (events received) and
// "window W" (the stream window it offered) and exits 0, or 1 if the
// stream broke.
//
//	lazywatch -endpoint HOST:PORT [-key K] [-puts N] [-value-size N] [-wait D]
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/clientv3"
	pb "go.etcd.io/etcd/etcdserver/etcdserverpb"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const window = 65535

func main() {
	endpoint := flag.String("endpoint", "127.0.0.1:2379", "client URL host:port")
	key := flag.String("key", "lazy", "key to watch and put")
	puts := flag.Int("puts", 8, "puts to make")
	size := flag.Int("value-size", 10000, "bytes per value")
	wait := flag.Duration("wait", 5*time.Second, "how long to wait for each put's event")
	flag.Parse()

	conn, err := net.Dial("tcp", *endpoint)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		fmt.Fprintln(os.Stderr, "preface:", err)
		os.Exit(1)
	}
	fr := http2.NewFramer(conn, conn)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window})
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"},
		{":path", "/etcdserverpb.Watch/Watch"}, {":authority", *endpoint},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
		CreateRequest: &pb.WatchCreateRequest{Key: []byte(*key)}}}
	msg, _ := req.Marshal()
	body := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(body[1:], uint32(len(msg)))
	copy(body[5:], msg)
	fr.WriteData(1, false, body)

	// The reader: answers SETTINGS and PING as HTTP/2 requires, and
	// never sends WINDOW_UPDATE.
	events := make(chan int64, 1024)
	created := make(chan struct{})
	broke := make(chan string, 1)
	go func() {
		var buf []byte
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				broke <- err.Error()
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					fr.WriteSettingsAck()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					fr.WritePing(true, f.Data)
				}
			case *http2.RSTStreamFrame:
				broke <- fmt.Sprintf("stream reset: %v", f.ErrCode)
				return
			case *http2.GoAwayFrame:
				broke <- fmt.Sprintf("goaway: %v", f.ErrCode)
				return
			case *http2.DataFrame:
				buf = append(buf, f.Data()...)
				for len(buf) >= 5 {
					n := int(binary.BigEndian.Uint32(buf[1:5]))
					if len(buf) < 5+n {
						break
					}
					var r pb.WatchResponse
					if err := r.Unmarshal(buf[5 : 5+n]); err != nil {
						broke <- "bad WatchResponse: " + err.Error()
						return
					}
					buf = buf[5+n:]
					if r.Created {
						close(created)
					}
					for _, e := range r.Events {
						events <- e.Kv.ModRevision
					}
				}
			}
		}
	}()
	select {
	case <-created:
	case why := <-broke:
		fmt.Fprintln(os.Stderr, "watch:", why)
		os.Exit(1)
	case <-time.After(10 * time.Second):
		fmt.Fprintln(os.Stderr, "watch: not created within 10 s")
		os.Exit(1)
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
	defer cli.Close()
	value := strings.Repeat("v", *size)
	got := 0
	for i := 0; i < *puts; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := cli.Put(ctx, *key, value)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "put:", err)
			os.Exit(1)
		}
		start := time.Now()
		select {
		case rev := <-events:
			if rev != resp.Header.Revision {
				fmt.Fprintf(os.Stderr, "event at revision %d for the put at %d\n", rev, resp.Header.Revision)
				os.Exit(1)
			}
			got++
			fmt.Printf("event %d (revision %d) after %v\n", i+1, rev, time.Since(start).Round(time.Millisecond))
		case why := <-broke:
			fmt.Fprintln(os.Stderr, "watch:", why)
			os.Exit(1)
		case <-time.After(*wait):
			fmt.Printf("event %d (revision %d) not received within %v\n", i+1, resp.Header.Revision, *wait)
		}
	}
	fmt.Printf("got %d\nwindow %d\n", got, window)
}
