// kvclient drives an etcd v3 member (cetcd, or Debian's etcd beside it)
// through etcd's own Go client (clientv3 3.4, Debian's
// golang-etcd-server-dev) and checks every answer it gets. Each
// "connection" below is a clientv3.Client of its own, so a TCP connection
// of its own; the kernel spreads them over the member's gatewayd
// processes (SO_REUSEPORT), and kvclient tells which process serves each
// one from /proc (the server side of the socket), to report and to aim.
//
// Values are a function of their key (a checksum, the length, filler
// derived from the key), so any value read back is checked without
// knowing who wrote it: a value of another key, a truncated or garbled
// one is caught.
//
//	kvclient write -endpoint E -prefix P -acks FILE [-writers W] [-per-conn K]
//	               [-gateways G] [-readers R] [-value-size N] [-duration D]
//	    W connections (more if needed until G server processes serve
//	    some; K goroutines each) put fresh keys P/wNNN/SEQ until
//	    SIGTERM or D; every acknowledged put is appended to FILE as
//	    "writer seq revision key value-size" as soon as it is acknowledged,
//	    and counted by the process that served the connection at the start.
//	    R reader connections read meanwhile: acknowledged keys (found, same
//	    value, same mod revision), ranges (values checked) and counts (at
//	    least what was acknowledged), serializable and linearizable in turn;
//	    a header revision never goes backwards on a connection.
//	kvclient check -endpoint E -prefix P -acks FILE[,FILE...]
//	    every acknowledged put is there with its value and mod revision;
//	    revisions are unique and grow in acknowledgement order per writer
//	    (a writer is its keys' folder, so each write run takes a prefix of
//	    its own under P); every value under P is well formed.
//	kvclient visibility -endpoint E -prefix P [-conns N] [-writes W] [-gateways G]
//	    opens connections until G server processes serve some; then each
//	    put (through each process in turn) must be seen, right after its
//	    acknowledgement, by a linearizable and a serializable get on every
//	    other connection.
//	kvclient hold -endpoint E -prefix P [-conns N] [-inflight K]
//	    keeps K big ranges in flight on each of N connections, checking
//	    every answer; prints "ready" once all connections answered, and
//	    "resumed after GAP ms" when answers come again after a stall
//	    (e.g. SIGSTOP, SIGCONT). Stops on SIGTERM.
//
// Each mode prints "name value" lines (counts, errors by gRPC code,
// connections per server process) and exits 1 when a check failed or an
// error was not a clean gRPC status, 2 on bad usage.
//
// Build: GO111MODULE=off GOPATH=/usr/share/gocode go build
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io/ioutil"
	"math/rand"
	"net"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/etcdserver/api/v3rpc/rpctypes"
	"go.etcd.io/etcd/mvcc/mvccpb"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ---------------------------------------------------------------- values

// valueFor is the value kvclient stores under key: "crc:size:" and size
// filler bytes drawn from the key's checksum.
func valueFor(key string, size int) string {
	h := crc32.ChecksumIEEE([]byte(key))
	var b strings.Builder
	fmt.Fprintf(&b, "%08x:%d:", h, size)
	x := uint64(h) | 1
	for i := 0; i < size; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		b.WriteByte('a' + byte((x>>58)%26))
	}
	return b.String()
}

// checkValue says why val is not a value valueFor made for key (nil: it is).
func checkValue(key string, val []byte) error {
	parts := strings.SplitN(string(val), ":", 3)
	if len(parts) != 3 {
		return fmt.Errorf("value of %q is not well formed (%d bytes: %.40q)", key, len(val), val)
	}
	size, err := strconv.Atoi(parts[1])
	if err != nil || size < 0 || size > 1<<24 {
		return fmt.Errorf("value of %q has a bad size field (%.40q)", key, val)
	}
	if string(val) != valueFor(key, size) {
		return fmt.Errorf("value of %q does not belong to it (%d bytes: %.40q)", key, len(val), val)
	}
	return nil
}

// ---------------------------------------------------------------- errors

// classify names an error by its gRPC code and says whether it is a clean
// failure: a gRPC status a server may answer (or the client's own
// deadline). Internal, Unknown and DataLoss are not clean: they are what
// a garbled answer turns into. One Unknown is etcd's own answer: etcd 3.4
// maps no gRPC code to raft's ErrProposalDropped (its
// etcdserver/api/v3rpc/util.go), so a put its raft drops (no leader
// known, a leader transfer under way) fails as Unknown "raft proposal
// dropped"; that put did not happen, a clean failure.
func classify(err error) (string, bool) {
	if err == nil {
		return "OK", true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "DeadlineExceeded(client)", true
	}
	var code codes.Code
	var msg string
	if ee, ok := err.(rpctypes.EtcdError); ok {
		code, msg = ee.Code(), ee.Error()
	} else if st, ok := status.FromError(err); ok {
		code, msg = st.Code(), st.Message()
	} else {
		return "not-a-status: " + err.Error(), false
	}
	name := code.String()
	if code == codes.Unknown && msg == errProposalDropped {
		return name + ": " + msg, true
	}
	switch code {
	case codes.Internal, codes.Unknown, codes.DataLoss:
		return name + ": " + msg, false
	}
	if len(msg) > 60 {
		msg = msg[:60]
	}
	return name + ": " + msg, true
}

// errProposalDropped is the text of raft's ErrProposalDropped.
const errProposalDropped = "raft proposal dropped"

// ---------------------------------------------------------------- report

// report gathers counts and failed checks from many goroutines.
type report struct {
	mu       sync.Mutex
	counts   map[string]int64
	failures int64
	shown    int
}

func newReport() *report { return &report{counts: map[string]int64{}} }

func (r *report) add(name string, n int64) {
	r.mu.Lock()
	r.counts[name] += n
	r.mu.Unlock()
}

// failf records a failed check; the first 20 are printed as they happen.
func (r *report) failf(format string, args ...interface{}) {
	r.mu.Lock()
	r.failures++
	show := r.shown < 20
	r.shown++
	r.mu.Unlock()
	if show {
		fmt.Printf("violation %s\n", fmt.Sprintf(format, args...))
	}
}

// err counts a failed request under "<what>-error <code>"; an unclean one
// also fails the run.
func (r *report) err(what string, err error) {
	name, clean := classify(err)
	r.add(what+"-error "+name, 1)
	if !clean {
		r.failf("%s failed without a clean gRPC status: %v", what, err)
	}
}

// print writes the counts sorted by name, then "violations N"; returns
// the exit code.
func (r *report) print() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.counts))
	for n := range r.counts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Printf("%s %d\n", n, r.counts[n])
	}
	fmt.Printf("violations %d\n", r.failures)
	if r.failures > 0 {
		return 1
	}
	return 0
}

// ---------------------------------------------------------------- connections

// conn is one client with one TCP connection; localPort is the client
// side of its latest socket (it changes when the client reconnects).
type conn struct {
	id        int
	cli       *clientv3.Client
	localPort int64
}

var (
	endpoint   string
	serverPort int
)

// quietLog keeps the client's retry warnings out of the output: the
// errors are counted instead.
var quietLog = func() zap.Config {
	c := zap.NewProductionConfig()
	c.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	return c
}()

// staticWindows turns off the client's flow-control window tuning (BDP
// estimation). grpc-go before 1.49 (Debian 12 has 1.33) races there: a
// stream opened while a ping's answer raises the window keeps the old
// limit on the client's side, while the SETTINGS frame that follows
// raises it on the server's, so a big answer sent at once in the new
// window is refused by the client itself (RST_STREAM FLOW_CONTROL_ERROR)
// and the call fails as "code = Internal desc = unexpected EOF"
// (grpc-go issue 5358). A server that writes a whole page of a paged
// read in one go, as cetcd does, meets it about once in a thousand
// pages; with fixed windows it cannot happen, and a truncated answer
// still fails the checks.
var staticWindows = []grpc.DialOption{
	grpc.WithInitialWindowSize(16 << 20),
	grpc.WithInitialConnWindowSize(64 << 20),
}

func openConn(id int) (*conn, error) {
	c := &conn{id: id}
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		addr = strings.TrimPrefix(addr, "http://")
		nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			atomic.StoreInt64(&c.localPort, int64(nc.LocalAddr().(*net.TCPAddr).Port))
		}
		return nc, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		DialOptions: append([]grpc.DialOption{grpc.WithContextDialer(dial)}, staticWindows...),
		LogConfig:   &quietLog,
	})
	if err != nil {
		return nil, err
	}
	c.cli = cli
	return c, nil
}

// openConns opens n connections and makes each answer once (so that its
// socket exists), retrying for up to 20 s.
func openConns(first, n int) ([]*conn, error) {
	conns := make([]*conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := openConn(first + i)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, c := range conns {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := c.cli.Get(ctx, "kvclient-probe", clientv3.WithSerializable())
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("connection %d does not answer: %v", c.id, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return conns, nil
}

func closeConns(conns []*conn) {
	for _, c := range conns {
		c.cli.Close()
	}
}

// serverOf names the process serving the connection's current socket:
// "gatewayd-N" (from its --gateway-index), or the program name, or "?"
// when the socket is not found (e.g. while it reconnects).
func serverOf(c *conn) string {
	lport := atomic.LoadInt64(&c.localPort)
	inode := serverInode(int(lport))
	if inode == "" {
		return "?"
	}
	target := "socket:[" + inode + "]"
	procs, _ := ioutil.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		fds, err := ioutil.ReadDir("/proc/" + p.Name() + "/fd")
		if err != nil {
			continue
		}
		for _, fd := range fds {
			l, err := os.Readlink("/proc/" + p.Name() + "/fd/" + fd.Name())
			if err == nil && l == target {
				return procName(p.Name())
			}
		}
	}
	return "?"
}

// serverInode finds, in /proc/net/tcp, the inode of the server's socket
// of the connection from loopback port lport to serverPort.
func serverInode(lport int) string {
	data, err := ioutil.ReadFile("/proc/net/tcp")
	if err != nil {
		return ""
	}
	local := fmt.Sprintf(":%04X", serverPort)
	remote := fmt.Sprintf(":%04X", lport)
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || !strings.HasSuffix(f[1], local) || !strings.HasSuffix(f[2], remote) {
			continue
		}
		if f[3] == "01" { // established
			return f[9]
		}
	}
	return ""
}

func procName(pid string) string {
	cmd, err := ioutil.ReadFile("/proc/" + pid + "/cmdline")
	if err != nil {
		return "?"
	}
	args := strings.Split(string(cmd), "\x00")
	for _, a := range args {
		if strings.HasPrefix(a, "--gateway-index=") {
			return "gatewayd-" + strings.TrimPrefix(a, "--gateway-index=")
		}
	}
	name := args[0]
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// byServer groups connections by the process serving them.
func byServer(conns []*conn) map[string][]*conn {
	m := map[string][]*conn{}
	for _, c := range conns {
		s := serverOf(c)
		m[s] = append(m[s], c)
	}
	return m
}

func reportServers(r *report, conns []*conn) {
	for s, cs := range byServer(conns) {
		r.add("conns "+s, int64(len(cs)))
	}
}

// ---------------------------------------------------------------- run control

// stopper is closed on SIGTERM/SIGINT or when the duration (if any) ends.
func stopper(d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		if d > 0 {
			select {
			case <-sig:
			case <-time.After(d):
			}
		} else {
			<-sig
		}
		close(done)
	}()
	return done
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

const requestTimeout = 5 * time.Second

// ---------------------------------------------------------------- write

// ackLog is the acknowledged puts: appended to a file line by line as
// they come (the file is the record others check) and kept in memory for
// this process's readers.
type ackLog struct {
	mu   sync.Mutex
	w    *bufio.Writer
	f    *os.File
	acks []ack
}

type ack struct {
	writer, seq int
	rev         int64
	key         string
	size        int
}

func (l *ackLog) add(a ack) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acks = append(l.acks, a)
	fmt.Fprintf(l.w, "%d %d %d %s %d\n", a.writer, a.seq, a.rev, a.key, a.size)
	return l.w.Flush()
}

// pick is a random acknowledged put and how many there were (0: none yet).
func (l *ackLog) pick(rng *rand.Rand) (ack, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.acks)
	if n == 0 {
		return ack{}, 0
	}
	// favour the latest: they are the ones a lagging read would miss
	i := n - 1 - rng.Intn(1+rng.Intn(n))
	return l.acks[i], n
}

func cmdWrite(args []string) int {
	fs := flag.NewFlagSet("write", flag.ExitOnError)
	prefix := fs.String("prefix", "kv", "key prefix")
	acksPath := fs.String("acks", "", "file the acknowledged puts are appended to")
	writers := fs.Int("writers", 4, "writer connections")
	perConn := fs.Int("per-conn", 1, "writing goroutines per writer connection")
	readers := fs.Int("readers", 0, "reader connections")
	valueSize := fs.Int("value-size", 64, "filler bytes per value")
	duration := fs.Duration("duration", 0, "stop after this long (0: at SIGTERM)")
	gateways := fs.Int("gateways", 1, "open writer connections until this many server processes serve some")
	fs.Parse(args)
	if *acksPath == "" || *writers < 1 || *perConn < 1 {
		fmt.Fprintln(os.Stderr, "write: -acks FILE is required, -writers and -per-conn >= 1")
		return 2
	}
	f, err := os.OpenFile(*acksPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "write:", err)
		return 2
	}
	defer f.Close()
	log := &ackLog{w: bufio.NewWriter(f), f: f}
	r := newReport()

	wconns, err := openConns(0, *writers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "write:", err)
		return 1
	}
	for len(byServer(wconns)) < *gateways && len(wconns) < 64 {
		more, err := openConns(len(wconns), 1)
		if err != nil {
			fmt.Fprintln(os.Stderr, "write:", err)
			return 1
		}
		wconns = append(wconns, more...)
	}
	defer func() { closeConns(wconns) }()
	rconns, err := openConns(len(wconns), *readers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "write:", err)
		return 1
	}
	defer closeConns(rconns)
	// the process serving each writer at the start, to count acks by it
	// (a connection that breaks may reconnect to another one)
	servers := make([]string, len(wconns))
	for i, c := range wconns {
		servers[i] = serverOf(c)
	}
	reportServers(r, wconns)
	for s, cs := range byServer(rconns) {
		r.add("reader-conns "+s, int64(len(cs)))
	}
	fmt.Printf("started %d writers %d readers\n", len(wconns), len(rconns))

	stop := stopper(*duration)
	var maxPutMs, maxGapMs int64
	var wg sync.WaitGroup
	for i, c := range wconns {
		for k := 0; k < *perConn; k++ {
			wg.Add(1)
			go func(writer int, c *conn, server string) {
				defer wg.Done()
				putLoop(stop, c, writer, *prefix, *valueSize, log, r, &maxPutMs, &maxGapMs, server)
			}(i**perConn+k, c, servers[i])
		}
	}
	for i, c := range rconns {
		wg.Add(1)
		go func(i int, c *conn) {
			defer wg.Done()
			readLoop(stop, c, int64(i), *prefix, log, r)
		}(i, c)
	}
	wg.Wait()
	r.add("acks", int64(len(log.acks)))
	r.add("max-put-ms", atomic.LoadInt64(&maxPutMs))
	r.add("max-gap-ms", atomic.LoadInt64(&maxGapMs))
	return r.print()
}

// putLoop puts fresh keys until stop; each request gets its own deadline
// (not stop's), so the put in flight at stop still gets its answer.
//
// maxGapMs gets the longest time a writer went without an acknowledged put
// (from one acknowledgement, or its start, to the next): how long its
// client saw no write go through.
func putLoop(stop <-chan struct{}, c *conn, writer int, prefix string, size int,
	log *ackLog, r *report, maxPutMs, maxGapMs *int64, server string) {
	var last int64
	lastAck := time.Now()
	for seq := 0; !stopped(stop); seq++ {
		key := fmt.Sprintf("%s/w%03d/%08d", prefix, writer, seq)
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		t0 := time.Now()
		resp, err := c.cli.Put(ctx, key, valueFor(key, size))
		cancel()
		storeMax(maxPutMs, time.Since(t0).Milliseconds())
		if err != nil {
			r.err("put", err)
			// a failed request is not retried: its key may or may not
			// exist, and the next put uses a new one
			time.Sleep(20 * time.Millisecond)
			continue
		}
		rev := resp.Header.Revision
		if rev <= last {
			r.failf("writer %d: put %s acknowledged at revision %d after %d", writer, key, rev, last)
		}
		last = rev
		storeMax(maxGapMs, time.Since(lastAck).Milliseconds())
		lastAck = time.Now()
		r.add("acks via "+server+" at start", 1)
		if err := log.add(ack{writer, seq, rev, key, size}); err != nil {
			r.failf("cannot record an acknowledged put: %v", err)
		}
	}
}

// storeMax raises *p to v if v is larger.
func storeMax(p *int64, v int64) {
	for {
		old := atomic.LoadInt64(p)
		if v <= old || atomic.CompareAndSwapInt64(p, old, v) {
			return
		}
	}
}

// readLoop reads until stop, serializable and linearizable in turn.
func readLoop(stop <-chan struct{}, c *conn, seed int64, prefix string, log *ackLog, r *report) {
	rng := rand.New(rand.NewSource(seed*7919 + time.Now().UnixNano()))
	var lastRev int64
	for n := 0; !stopped(stop); n++ {
		var opts []clientv3.OpOption
		mode := "linearizable"
		if n%2 == 1 {
			opts = append(opts, clientv3.WithSerializable())
			mode = "serializable"
		}
		a, nacks := log.pick(rng)
		if nacks == 0 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		var resp *clientv3.GetResponse
		var err error
		kind := rng.Intn(3)
		switch kind {
		case 0: // an acknowledged key
			resp, err = c.cli.Get(ctx, a.key, opts...)
		case 1: // up to 20 keys of a writer from an acknowledged one
			end := clientv3.GetPrefixRangeEnd(fmt.Sprintf("%s/w%03d/", prefix, a.writer))
			resp, err = c.cli.Get(ctx, a.key, append(opts, clientv3.WithRange(end), clientv3.WithLimit(20))...)
		case 2: // how many keys there are: at least what was acknowledged
			resp, err = c.cli.Get(ctx, prefix+"/", append(opts, clientv3.WithPrefix(), clientv3.WithCountOnly())...)
		}
		cancel()
		if err != nil {
			r.err("read", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		r.add("reads "+mode, 1)
		h := resp.Header.Revision
		if h < lastRev {
			r.failf("%s read on connection %d: header revision %d after %d", mode, c.id, h, lastRev)
		}
		lastRev = h
		if h < a.rev {
			r.failf("%s read of %s on connection %d: header revision %d below its acknowledged revision %d",
				mode, a.key, c.id, h, a.rev)
		}
		checkKVs(r, resp.Kvs, h, mode)
		switch kind {
		case 0:
			if len(resp.Kvs) != 1 {
				r.failf("%s read on connection %d: acknowledged key %s (revision %d) not found at revision %d",
					mode, c.id, a.key, a.rev, h)
			} else if kv := resp.Kvs[0]; string(kv.Key) != a.key || kv.ModRevision != a.rev {
				r.failf("%s read on connection %d: asked %s (revision %d), got %s at mod revision %d",
					mode, c.id, a.key, a.rev, kv.Key, kv.ModRevision)
			}
		case 1:
			if len(resp.Kvs) == 0 || string(resp.Kvs[0].Key) != a.key {
				r.failf("%s range from acknowledged key %s on connection %d does not start with it", mode, a.key, c.id)
			}
		case 2:
			if resp.Count < int64(nacks) {
				r.failf("%s count on connection %d: %d keys, but %d puts of new keys were acknowledged before",
					mode, c.id, resp.Count, nacks)
			}
			r.add("counts-checked", 1)
		}
	}
}

// checkKVs checks the values and revisions of an answer at header
// revision h.
func checkKVs(r *report, kvs []*mvccpb.KeyValue, h int64, mode string) {
	for _, kv := range kvs {
		if err := checkValue(string(kv.Key), kv.Value); err != nil {
			r.failf("%s read: %v", mode, err)
		}
		if kv.ModRevision > h || kv.CreateRevision > kv.ModRevision || kv.ModRevision <= 0 {
			r.failf("%s read: %s has create/mod revision %d/%d at header revision %d",
				mode, kv.Key, kv.CreateRevision, kv.ModRevision, h)
		}
	}
	r.add("values-checked", int64(len(kvs)))
}

// ---------------------------------------------------------------- check

func readAcks(paths string) ([]ack, error) {
	var acks []ack
	for _, p := range strings.Split(paths, ",") {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var a ack
			if _, err := fmt.Sscanf(sc.Text(), "%d %d %d %s %d", &a.writer, &a.seq, &a.rev, &a.key, &a.size); err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: bad line %q", p, sc.Text())
			}
			acks = append(acks, a)
		}
		f.Close()
	}
	return acks, nil
}

func cmdCheck(args []string) int {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	prefix := fs.String("prefix", "kv", "key prefix")
	acksPath := fs.String("acks", "", "ack files, comma separated")
	fs.Parse(args)
	acks, err := readAcks(*acksPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "check:", err)
		return 2
	}
	r := newReport()
	conns, err := openConns(0, 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, "check:", err)
		return 1
	}
	defer closeConns(conns)
	cli := conns[0].cli

	// the acks themselves: revisions unique, growing per writer (per
	// file: a writer number is reused by the next run's file)
	seen := map[int64]string{}
	for _, a := range acks {
		if k, dup := seen[a.rev]; dup {
			r.failf("revision %d acknowledged for both %s and %s", a.rev, k, a.key)
		}
		seen[a.rev] = a.key
	}
	last := map[string]int64{}
	for _, a := range acks {
		w := a.key[:strings.LastIndexByte(a.key, '/')]
		if a.rev <= last[w] {
			r.failf("%s: acknowledged at revision %d after revision %d of the same writer", a.key, a.rev, last[w])
		}
		last[w] = a.rev
	}

	// everything under the prefix, a page at a time, at one revision
	stored := map[string]*mvccpb.KeyValue{}
	from, end := *prefix+"/", clientv3.GetPrefixRangeEnd(*prefix+"/")
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(2000)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		resp, err := cli.Get(ctx, from, opts...)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "check: range:", err)
			return 1
		}
		rev = resp.Header.Revision
		checkKVs(r, resp.Kvs, rev, "check")
		for _, kv := range resp.Kvs {
			stored[string(kv.Key)] = kv
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	for _, a := range acks {
		kv := stored[a.key]
		switch {
		case kv == nil:
			r.failf("acknowledged put lost: %s (revision %d)", a.key, a.rev)
		case kv.ModRevision != a.rev:
			r.failf("%s acknowledged at revision %d has mod revision %d", a.key, a.rev, kv.ModRevision)
		case string(kv.Value) != valueFor(a.key, a.size):
			r.failf("%s has another value than acknowledged: %.40q", a.key, kv.Value)
		default:
			r.add("acks-found", 1)
		}
	}
	r.add("acks", int64(len(acks)))
	r.add("keys", int64(len(stored)))
	r.add("revision", rev)
	return r.print()
}

// ---------------------------------------------------------------- visibility

func cmdVisibility(args []string) int {
	fs := flag.NewFlagSet("visibility", flag.ExitOnError)
	prefix := fs.String("prefix", "vis", "key prefix")
	nconns := fs.Int("conns", 12, "connections to open first")
	maxConns := fs.Int("max-conns", 64, "connections to open at most to reach -gateways")
	writes := fs.Int("writes", 200, "puts")
	gateways := fs.Int("gateways", 2, "server processes that must serve connections")
	fs.Parse(args)
	r := newReport()
	conns, err := openConns(0, *nconns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "visibility:", err)
		return 1
	}
	defer func() { closeConns(conns) }()
	groups := byServer(conns)
	for len(groups) < *gateways && len(conns) < *maxConns {
		more, err := openConns(len(conns), 4)
		if err != nil {
			fmt.Fprintln(os.Stderr, "visibility:", err)
			return 1
		}
		conns = append(conns, more...)
		groups = byServer(conns)
	}
	names := make([]string, 0, len(groups))
	for s, cs := range groups {
		r.add("conns "+s, int64(len(cs)))
		names = append(names, s)
	}
	sort.Strings(names)
	if len(groups) < *gateways {
		r.failf("%d connections reached only %d server process(es): %v", len(conns), len(groups), names)
		return r.print()
	}
	for w := 0; w < *writes; w++ {
		from := names[w%len(names)]
		wc := groups[from][w/len(names)%len(groups[from])]
		key := fmt.Sprintf("%s/%06d", *prefix, w)
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		resp, err := wc.cli.Put(ctx, key, valueFor(key, 16))
		cancel()
		if err != nil {
			r.err("put", err)
			continue
		}
		rev := resp.Header.Revision
		r.add("puts via "+from, 1)
		var wg sync.WaitGroup
		for _, c := range conns {
			if c == wc {
				continue
			}
			wg.Add(1)
			go func(c *conn) {
				defer wg.Done()
				for _, serializable := range []bool{false, true} {
					readAfterAck(r, c, key, rev, from, serializable)
				}
			}(c)
		}
		wg.Wait()
	}
	// the spread again at the end: a connection that moved is reported
	for s, cs := range byServer(conns) {
		r.add("conns-at-end "+s, int64(len(cs)))
	}
	return r.print()
}

// readAfterAck reads key, put at rev through process from, on c.
func readAfterAck(r *report, c *conn, key string, rev int64, from string, serializable bool) {
	mode := "linearizable"
	var opts []clientv3.OpOption
	if serializable {
		mode = "serializable"
		opts = append(opts, clientv3.WithSerializable())
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	resp, err := c.cli.Get(ctx, key, opts...)
	cancel()
	if err != nil {
		r.err("read", err)
		return
	}
	checkKVs(r, resp.Kvs, resp.Header.Revision, mode)
	if len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != rev {
		r.failf("%s get of %s on connection %d (%s) right after its put through %s was acknowledged at revision %d: %d key(s), header revision %d",
			mode, key, c.id, serverOf(c), from, rev, len(resp.Kvs), resp.Header.Revision)
		return
	}
	r.add("reads-after-ack "+mode, 1)
}

// ---------------------------------------------------------------- hold

func cmdHold(args []string) int {
	fs := flag.NewFlagSet("hold", flag.ExitOnError)
	prefix := fs.String("prefix", "big", "key prefix")
	nconns := fs.Int("conns", 8, "connections")
	inflight := fs.Int("inflight", 4, "ranges in flight per connection")
	keys := fs.Int("keys", 256, "keys under the prefix")
	valueSize := fs.Int("value-size", 4096, "filler bytes per value")
	fs.Parse(args)
	r := newReport()
	conns, err := openConns(0, *nconns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hold:", err)
		return 1
	}
	defer closeConns(conns)
	for i := 0; i < *keys; i++ {
		key := fmt.Sprintf("%s/%06d", *prefix, i)
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		_, err := conns[0].cli.Put(ctx, key, valueFor(key, *valueSize))
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "hold: put:", err)
			return 1
		}
	}
	reportServers(r, conns)

	stop := stopper(0)
	lastAnswer := time.Now().UnixNano() // of any connection, atomic
	var resumedOnce sync.Once
	ready := make(chan struct{})
	var wg sync.WaitGroup
	var firstRound sync.WaitGroup
	for _, c := range conns {
		firstRound.Add(1)
		var first sync.Once
		for k := 0; k < *inflight; k++ {
			wg.Add(1)
			go func(c *conn, first *sync.Once) {
				defer wg.Done()
				for !stopped(stop) {
					// long deadline: a stall of the whole process
					// (SIGSTOP) must not turn into timeouts
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					resp, err := c.cli.Get(ctx, *prefix+"/", clientv3.WithPrefix())
					cancel()
					now := time.Now().UnixNano()
					if err != nil {
						r.err("range", err)
						time.Sleep(50 * time.Millisecond)
						continue
					}
					checkKVs(r, resp.Kvs, resp.Header.Revision, "range")
					if len(resp.Kvs) != *keys {
						r.failf("range on connection %d: %d keys, want %d", c.id, len(resp.Kvs), *keys)
					}
					r.add("ranges", 1)
					gap := now - atomic.SwapInt64(&lastAnswer, now)
					first.Do(firstRound.Done)
					select {
					case <-ready:
						if gap > int64(time.Second) {
							resumedOnce.Do(func() { fmt.Printf("resumed after %d ms\n", gap/1e6) })
						}
					default:
					}
				}
			}(c, &first)
		}
	}
	go func() {
		firstRound.Wait()
		close(ready)
		fmt.Println("ready")
	}()
	wg.Wait()
	return r.print()
}

// ---------------------------------------------------------------- main

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kvclient write|check|visibility|hold -endpoint HOST:PORT ...")
		os.Exit(2)
	}
	mode, args := os.Args[1], os.Args[2:]
	// -endpoint is common to every mode; take it out before the mode's flags
	rest := args[:0:0]
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-endpoint" && i+1 < len(args):
			endpoint = args[i+1]
			i++
		case strings.HasPrefix(args[i], "-endpoint="):
			endpoint = strings.TrimPrefix(args[i], "-endpoint=")
		default:
			rest = append(rest, args[i])
		}
	}
	_, port, err := net.SplitHostPort(endpoint)
	if err == nil {
		serverPort, err = strconv.Atoi(port)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvclient: -endpoint HOST:PORT is required (got %q)\n", endpoint)
		os.Exit(2)
	}
	// stdout is read by the tests as it comes
	var code int
	switch mode {
	case "write":
		code = cmdWrite(rest)
	case "check":
		code = cmdCheck(rest)
	case "visibility":
		code = cmdVisibility(rest)
	case "hold":
		code = cmdHold(rest)
	default:
		fmt.Fprintf(os.Stderr, "kvclient: unknown mode %q\n", mode)
		code = 2
	}
	os.Exit(code)
}
