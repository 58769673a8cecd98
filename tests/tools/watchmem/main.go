// watchmem holds many Watch streams and watchers open on an etcd v3
// member (cetcd, or Debian's etcd beside it), for bench/watch-memory.sh to
// measure the server's memory at each step. It speaks the Watch service
// directly through gRPC (etcdserverpb, Debian's golang-etcd-server-dev),
// one gRPC stream per Watch call, so the counts are exactly what the
// server holds (clientv3 would merge watchers into streams its own way).
//
//	watchmem -endpoint E [-conns C] [-streams S] [-per-stream W] [-prefix P] [-key-size K]
//
// Opens C connections and S Watch streams spread over them, and sends on
// each stream a progress request, whose answer shows the server holds the
// stream; prints "streams S" and waits for a line on stdin. Then creates W
// watchers on each stream, each on a key of its own (P/sSSSS/wWWWW, padded
// with "x" to K bytes when shorter), and
// waits for every created answer; prints "watchers N" and waits for a
// line on stdin (or its end), then closes everything and exits. Any error
// or a canceled watch exits nonzero.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/etcdserver/etcdserverpb"
	"google.golang.org/grpc"
)

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "watchmem: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	endpoint := flag.String("endpoint", "127.0.0.1:2379", "member's client address")
	nconns := flag.Int("conns", 10, "connections")
	nstreams := flag.Int("streams", 1000, "Watch streams in all")
	perStream := flag.Int("per-stream", 100, "watchers per stream")
	prefix := flag.String("prefix", "watchmem", "key prefix")
	keySize := flag.Int("key-size", 0, "pad keys with x to this many bytes")
	flag.Parse()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conns := make([]*grpc.ClientConn, *nconns)
	for i := range conns {
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := grpc.DialContext(dctx, *endpoint, grpc.WithInsecure(), grpc.WithBlock(),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		dcancel()
		if err != nil {
			fail("dial %s: %v", *endpoint, err)
		}
		conns[i] = c
	}

	streams := make([]pb.Watch_WatchClient, *nstreams)
	// Each stream's receiver reports on its channel: first the progress
	// answer, then once all its watchers are created.
	steps := make([]chan struct{}, *nstreams)
	var wg sync.WaitGroup
	for i := range streams {
		s, err := pb.NewWatchClient(conns[i%len(conns)]).Watch(ctx)
		if err != nil {
			fail("stream %d: %v", i, err)
		}
		streams[i] = s
		steps[i] = make(chan struct{}, 2)
		if err := s.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{
			ProgressRequest: &pb.WatchProgressRequest{}}}); err != nil {
			fail("stream %d progress: %v", i, err)
		}
		wg.Add(1)
		go func(i int, s pb.Watch_WatchClient) {
			defer wg.Done()
			progressed, created := false, 0
			for {
				r, err := s.Recv()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					fail("stream %d: %v", i, err)
				}
				switch {
				case r.Canceled:
					fail("stream %d: watch %d canceled: %s", i, r.WatchId, r.CancelReason)
				case r.Created:
					created++
					if created == *perStream {
						steps[i] <- struct{}{}
					}
				case !progressed && len(r.Events) == 0:
					progressed = true
					steps[i] <- struct{}{}
				}
			}
		}(i, s)
	}
	for i := range steps {
		<-steps[i]
	}
	fmt.Printf("streams %d\n", *nstreams)
	in := bufio.NewReader(os.Stdin)
	in.ReadString('\n')

	if *perStream > 0 {
		for i, s := range streams {
			for w := 0; w < *perStream; w++ {
				key := fmt.Sprintf("%s/s%04d/w%04d", *prefix, i, w)
				if len(key) < *keySize {
					key += strings.Repeat("x", *keySize-len(key))
				}
				if err := s.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
					CreateRequest: &pb.WatchCreateRequest{Key: []byte(key)}}}); err != nil {
					fail("stream %d create: %v", i, err)
				}
			}
		}
		for i := range steps {
			<-steps[i]
		}
	}
	fmt.Printf("watchers %d\n", *nstreams**perStream)
	in.ReadString('\n')
	cancel()
	for _, s := range streams {
		s.CloseSend()
	}
	for _, c := range conns {
		c.Close()
	}
}
