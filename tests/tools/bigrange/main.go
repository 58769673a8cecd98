// bigrange loads a member with many large keys and reads them back with
// one Range, through etcd's own gRPC stubs (Debian's
// golang-etcd-server-dev), checking the whole answer.
//
// Key i of prefix P is P/%08d; its value is i in decimal, zero-padded to
// the value size, so any value read back is checked without storing it.
//
//	bigrange load -endpoint E -prefix P -n N -size S [-batch B] [-from F]
//	    puts keys F to N-1 in txns of B puts each (B must fit the member's
//	    --max-txn-ops and --max-request-bytes); again, they are new
//	    revisions of the same values.
//	bigrange get -endpoint E -prefix P -n N -size S [-rate R] [-keys-only]
//	             [-count-only] [-serializable] [-write-during K] [-stop-after B]
//	             [-timeout D]
//	    one Range of the prefix, whose socket is read at most R bytes a
//	    second (0: as fast as it comes), with a small receive buffer; checks
//	    count, every key in order and every value. With -write-during K,
//	    once the answer's first MiB has come, another connection overwrites
//	    K keys of the range and adds K new ones and waits for them to be
//	    acknowledged; the Range must still give every key as loaded, at a
//	    header revision below the writes', and the writes must have been
//	    acknowledged before the answer ended. With -stop-after B the
//	    process prints "stopping" and waits to be killed once B bytes came;
//	    with -timeout D the Range has that deadline (grpc-timeout).
//
// Prints "name value" lines; exits 1 when a check fails, 2 on bad usage.
//
// Build: GO111MODULE=off GOPATH=/usr/share/gocode go build
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/etcdserver/etcdserverpb"
	"google.golang.org/grpc"
)

var (
	endpoint    = flag.String("endpoint", "127.0.0.1:2379", "member's client address")
	prefix      = flag.String("prefix", "big", "key prefix")
	n           = flag.Int("n", 100000, "keys")
	size        = flag.Int("size", 1024, "value bytes")
	batch       = flag.Int("batch", 1000, "puts per txn")
	from        = flag.Int("from", 0, "load: the first key to put")
	rate        = flag.Int("rate", 0, "bytes a second the Range's socket is read at (0: unlimited)")
	keysOnly    = flag.Bool("keys-only", false, "keys_only")
	countOnly   = flag.Bool("count-only", false, "count_only")
	serial      = flag.Bool("serializable", false, "serializable")
	writeDuring = flag.Int("write-during", 0, "keys overwritten and added during the Range")
	stopAfter   = flag.Int64("stop-after", 0, "bytes after which to stop reading and wait")
	timeout     = flag.Duration("timeout", 0, "the Range's deadline (0: none)")
)

var failed bool

func fail(format string, a ...interface{}) {
	fmt.Printf("FAIL "+format+"\n", a...)
	failed = true
}

func key(i int) []byte   { return []byte(fmt.Sprintf("%s/%08d", *prefix, i)) }
func value(i int) []byte { return []byte(fmt.Sprintf("%0*d", *size, i)) }

// slowConn reads its socket at most rate bytes a second, and counts what
// came; once stopAfter bytes came it stops reading.
type slowConn struct {
	net.Conn
	rate  int
	start time.Time
	got   int64
	first chan struct{}
	once  sync.Once
}

func (c *slowConn) Read(p []byte) (int, error) {
	if len(p) > 16384 {
		p = p[:16384]
	}
	got := atomic.LoadInt64(&c.got)
	if *stopAfter > 0 && got >= *stopAfter {
		fmt.Println("stopping")
		select {}
	}
	if c.rate > 0 {
		due := c.start.Add(time.Duration(float64(got) / float64(c.rate) * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
	}
	k, err := c.Conn.Read(p)
	if atomic.AddInt64(&c.got, int64(k)) >= 1<<20 {
		c.once.Do(func() { close(c.first) })
	}
	return k, err
}

func dial(ctx context.Context, wrap func(net.Conn) net.Conn) *grpc.ClientConn {
	d := func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if wrap != nil {
			c.(*net.TCPConn).SetReadBuffer(64 << 10)
			return wrap(c), nil
		}
		return c, nil
	}
	cc, err := grpc.DialContext(ctx, *endpoint, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithContextDialer(d),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))
	if err != nil {
		fmt.Println("FAIL dial:", err)
		os.Exit(1)
	}
	return cc
}

func load(ctx context.Context) {
	kv := pb.NewKVClient(dial(ctx, nil))
	var rev int64
	for i := *from; i < *n; i += *batch {
		req := &pb.TxnRequest{}
		for j := i; j < i+*batch && j < *n; j++ {
			req.Success = append(req.Success, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{
				RequestPut: &pb.PutRequest{Key: key(j), Value: value(j)}}})
		}
		resp, err := kv.Txn(ctx, req)
		if err != nil {
			fmt.Println("FAIL txn:", err)
			os.Exit(1)
		}
		rev = resp.Header.Revision
	}
	fmt.Println("loaded", *n-*from)
	fmt.Println("revision", rev)
}

// writes overwrites and adds k keys through its own connection; returns
// the lowest revision they made.
func writes(ctx context.Context, k int) int64 {
	kv := pb.NewKVClient(dial(ctx, nil))
	low := int64(math.MaxInt64)
	for i := 0; i < k; i++ {
		for _, kk := range [][]byte{key(i * (*n / k)), key(*n + i)} {
			resp, err := kv.Put(ctx, &pb.PutRequest{Key: kk, Value: []byte("changed")})
			if err != nil {
				fail("put during the range: %v", err)
				return low
			}
			if resp.Header.Revision < low {
				low = resp.Header.Revision
			}
		}
	}
	return low
}

func get(ctx context.Context) {
	sc := &slowConn{rate: *rate, start: time.Now(), first: make(chan struct{})}
	cc := dial(ctx, func(c net.Conn) net.Conn { sc.Conn = c; sc.start = time.Now(); return sc })
	kv := pb.NewKVClient(cc)
	// every key of the prefix: [P/, P0), '0' following '/'
	req := &pb.RangeRequest{Key: []byte(*prefix + "/"), RangeEnd: []byte(*prefix + "0"),
		KeysOnly: *keysOnly, CountOnly: *countOnly, Serializable: *serial}

	var low int64
	var wrote sync.WaitGroup
	var ackedAt time.Time
	if *writeDuring > 0 {
		wrote.Add(1)
		go func() {
			defer wrote.Done()
			<-sc.first
			low = writes(ctx, *writeDuring)
			ackedAt = time.Now()
			fmt.Println("writes-acked", 2**writeDuring)
		}()
	}
	rctx := ctx
	if *timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	t0 := time.Now()
	resp, err := kv.Range(rctx, req)
	done := time.Now()
	if err != nil {
		fmt.Println("FAIL range:", err)
		os.Exit(1)
	}
	fmt.Println("ms", done.Sub(t0).Milliseconds())
	fmt.Println("bytes", atomic.LoadInt64(&sc.got))
	fmt.Println("revision", resp.Header.Revision)
	fmt.Println("count", resp.Count)
	fmt.Println("kvs", len(resp.Kvs))
	if resp.Count != int64(*n) {
		fail("count %d, want %d", resp.Count, *n)
	}
	want := *n
	if *countOnly {
		want = 0
	}
	if len(resp.Kvs) != want {
		fail("%d kvs, want %d", len(resp.Kvs), want)
	}
	if resp.More {
		fail("more set")
	}
	bad := 0
	for i, kv := range resp.Kvs {
		wantV := value(i)
		if *keysOnly {
			wantV = nil
		}
		if !bytes.Equal(kv.Key, key(i)) || !bytes.Equal(kv.Value, wantV) ||
			kv.ModRevision > resp.Header.Revision || kv.Version != 1 {
			if bad < 3 {
				fail("kv %d: key %q, %d value bytes, mod %d, version %d", i, kv.Key,
					len(kv.Value), kv.ModRevision, kv.Version)
			}
			bad++
		}
	}
	fmt.Println("bad-kvs", bad)
	if *writeDuring > 0 {
		wrote.Wait()
		if low <= resp.Header.Revision {
			fail("the range's revision %d is not below the writes' %d", resp.Header.Revision, low)
		}
		if !ackedAt.Before(done) {
			fail("the writes were acknowledged after the range ended")
		}
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bigrange load|get [flags]")
		os.Exit(2)
	}
	mode := os.Args[1]
	flag.CommandLine.Parse(os.Args[2:])
	ctx := context.Background()
	switch mode {
	case "load":
		load(ctx)
	case "get":
		get(ctx)
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", mode)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}
