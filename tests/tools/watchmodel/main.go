// watchmodel checks etcd's Watch against a model of the history it made.
//
// One writer applies random puts, deletes (single keys and ranges), txns
// (several puts and a delete in one revision) and compactions to keys
// under a prefix, and keeps the exact history (every event with its
// revision, value and previous value) from its own acknowledged writes.
// Meanwhile W watchers, each on a raw Watch stream of its own, are created
// at random times with a random key, prefix range or from-key range, a
// random start revision (current, or one in the past not below the last
// compaction), random NOPUT/NODELETE filters and prev_kv. When the writer
// is done, each watcher's events must be exactly the history's events in
// its range from its start revision on: none missing, none twice, in
// revision order, events of one revision in one response.
//
// With -slow, half of the watchers pause reading for a while, so their
// server streams fill up. With -puts-only, the writer only puts (values are
// unique), so that an answer lost to a killed process is resolved by
// reading the key back; watchers whose stream breaks reconnect and resume
// at the last revision they saw + 1, as clientv3 does. One more watcher
// starts at revision 1 after a compaction and must be cancelled with the
// compact revision.
//
// -endpoint may list several members (comma-separated): watcher i starts
// on member i mod n, and the writer on the first. A watcher whose stream
// breaks, and a writer whose request fails, go on with the next member.
//
// With -progress, half of the watchers ask for progress notifications,
// every stream sends a WatchProgressRequest every 250 ms, and one more
// watcher per member watches an idle range with progress notifications.
// On every stream the progress revisions never go backwards; after a
// watcher's own progress notification at revision R it gets no event at
// or below R (R says it has everything up to R); and by the end each idle
// watcher hears of the writer's last revision. With -cetcd-progress (the
// members are cetcd's, CETCD_WATCH_PROGRESS_MS short) the same holds for
// WatchProgressRequest answers (etcd 3.4 answers with its store revision,
// which a watcher catching up may not have), and each idle watcher gets
// progress notifications of its own.
//
//	watchmodel -endpoint E[,E...] [-prefix P] [-ops N] [-watchers W] [-seed S]
//	           [-slow] [-puts-only] [-no-compact] [-early] [-value-size N]
//	           [-progress [-cetcd-progress]]
//
// Prints "events N" (delivered, all watchers) and "ok", or what differed,
// and exits 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/etcdserver/etcdserverpb"
	"go.etcd.io/etcd/mvcc/mvccpb"
	"google.golang.org/grpc"
)

type ev struct {
	rev   int64
	del   bool
	key   string
	value string
	prev  string // "" and hasPrev false: none
	hasPr bool
}

type watcher struct {
	id                                   int
	key, end                             string
	start                                int64
	member                               int // the member it watches on first
	noput, nodel, prevKV, slow, progress bool
	pfloor                               int64     // its own progress said everything up to here came
	plast                                int64     // the newest revision a progress response named
	ticks                                int       // its own progress notifications
	nprogress                            int       // progress responses of any kind
	createdAt                            time.Time // when its first stream was created
	mu                                   sync.Mutex
	got                                  []ev
	last                                 int64
	respRevs                             [][]int64
	reconnects                           int
	errs                                 []string
	// a compaction passed the next revision it needed (next) before the
	// member had given it that revision: cancelled with compactedAt, as
	// etcd cancels it; it is owed the history below next only
	compactedAt, next int64
}

var (
	endpoint  = flag.String("endpoint", "127.0.0.1:2379", "client address")
	prefix    = flag.String("prefix", "wm/", "key prefix")
	nops      = flag.Int("ops", 600, "write operations")
	nwatch    = flag.Int("watchers", 24, "watchers")
	seed      = flag.Int64("seed", 1, "seed")
	slow      = flag.Bool("slow", false, "half of the watchers pause reading")
	putsOnly  = flag.Bool("puts-only", false, "only puts (for runs with killed processes)")
	valueSize = flag.Int("value-size", 64, "largest value size")
	noCompact = flag.Bool("no-compact", false, "no compactions (a watcher that falls 20 revisions behind would be compacted away, as with etcd)")
	early     = flag.Bool("early", false, "every watcher starts in the first tenth of the writes")
	progress  = flag.Bool("progress", false, "check progress notifications and WatchProgressRequest answers")
	cetcdProg = flag.Bool("cetcd-progress", false, "with -progress: the members are cetcd's, with short progress ticks")
	endpoints []string
)

// dial connects to member i, or to the next ones while it cannot.
func dial(i int) (*grpc.ClientConn, int) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		c, err := grpc.DialContext(ctx, endpoints[i%len(endpoints)], grpc.WithInsecure(), grpc.WithBlock())
		cancel()
		if err == nil {
			return c, i % len(endpoints)
		}
		i++
		time.Sleep(100 * time.Millisecond)
	}
}

func inRange(w *watcher, k string) bool {
	if w.end == "" {
		return k == w.key
	}
	if w.end == "\x00" {
		return k >= w.key
	}
	return k >= w.key && k < w.end
}

func (w *watcher) run(ctx context.Context) {
	conn, member := dial(w.member)
	defer func() { conn.Close() }()
	next := w.start
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(ctx)
		stream, err := etcdserverpb.NewWatchClient(conn).Watch(sctx)
		if err != nil {
			cancel()
			time.Sleep(100 * time.Millisecond)
			continue
		}
		req := &etcdserverpb.WatchCreateRequest{Key: []byte(w.key), StartRevision: next, PrevKv: w.prevKV, ProgressNotify: w.progress}
		if w.end != "" {
			req.RangeEnd = []byte(w.end)
		}
		if w.noput {
			req.Filters = append(req.Filters, etcdserverpb.WatchCreateRequest_NOPUT)
		}
		if w.nodel {
			req.Filters = append(req.Filters, etcdserverpb.WatchCreateRequest_NODELETE)
		}
		if err := stream.Send(&etcdserverpb.WatchRequest{RequestUnion: &etcdserverpb.WatchRequest_CreateRequest{CreateRequest: req}}); err != nil {
			cancel()
			continue
		}
		if *progress {
			go func() { // the only sender on this stream from now on
				t := time.NewTicker(250 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-sctx.Done():
						return
					case <-t.C:
					}
					pr := &etcdserverpb.WatchRequest{RequestUnion: &etcdserverpb.WatchRequest_ProgressRequest{ProgressRequest: &etcdserverpb.WatchProgressRequest{}}}
					if stream.Send(pr) != nil {
						return
					}
				}
			}()
		}
		myID := int64(-2)
		var streamProg int64 // progress revisions on this stream never go back
		for {
			r, err := stream.Recv()
			if err != nil {
				break
			}
			if r.Created {
				myID = r.WatchId
				w.mu.Lock()
				if w.createdAt.IsZero() {
					w.createdAt = time.Now()
				}
				w.mu.Unlock()
				continue
			}
			if len(r.Events) == 0 && !r.Canceled && r.Header != nil {
				rv := r.Header.Revision
				own := r.WatchId == myID
				w.mu.Lock()
				if rv < streamProg {
					w.errs = append(w.errs, fmt.Sprintf("progress went back from %d to %d (watch id %d)", streamProg, rv, r.WatchId))
				}
				if rv > streamProg {
					streamProg = rv
				}
				if (own || (*cetcdProg && r.WatchId == -1)) && rv > w.pfloor {
					w.pfloor = rv
				}
				if rv > w.plast {
					w.plast = rv
				}
				if own {
					w.ticks++
				}
				w.nprogress++
				w.mu.Unlock()
				continue
			}
			if w.slow && len(w.respRevs) == 3 {
				time.Sleep(3 * time.Second) // the server's queue for us fills
			}
			if r.Canceled {
				w.mu.Lock()
				need := w.start
				if w.last+1 > need {
					need = w.last + 1
				}
				if w.id >= 0 && r.CancelReason == "" && r.CompactRevision > need {
					w.compactedAt, w.next = r.CompactRevision, need
				} else {
					w.errs = append(w.errs, fmt.Sprintf("canceled: %q compact %d", r.CancelReason, r.CompactRevision))
				}
				w.mu.Unlock()
				cancel()
				return
			}
			if len(r.Events) == 0 {
				continue
			}
			w.mu.Lock()
			var revs []int64
			for _, e := range r.Events {
				x := ev{rev: e.Kv.ModRevision, del: e.Type == mvccpb.DELETE, key: string(e.Kv.Key), value: string(e.Kv.Value)}
				if x.rev <= w.pfloor {
					w.errs = append(w.errs, fmt.Sprintf("event at revision %d after a progress response at %d", x.rev, w.pfloor))
				}
				if e.PrevKv != nil {
					x.prev, x.hasPr = string(e.PrevKv.Value), true
				}
				w.got = append(w.got, x)
				revs = append(revs, x.rev)
				if x.rev > w.last {
					w.last = x.rev
				}
			}
			// a response stands for the revision in its header, which
			// covers every event it carries (several revisions' may
			// share one response)
			if r.Header != nil && r.Header.Revision < revs[len(revs)-1] {
				w.errs = append(w.errs, fmt.Sprintf("response at revision %d carries an event at %d", r.Header.Revision, revs[len(revs)-1]))
			}
			w.respRevs = append(w.respRevs, revs)
			next = w.last + 1
			w.mu.Unlock()
		}
		cancel()
		w.mu.Lock()
		w.reconnects++
		w.mu.Unlock()
		if ctx.Err() == nil && len(endpoints) > 1 { // as clientv3 does: another member
			conn.Close()
			conn, member = dial(member + 1)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func main() {
	flag.Parse()
	endpoints = strings.Split(*endpoint, ",")
	rng := rand.New(rand.NewSource(*seed))
	// the writer's connections, one per member, made without waiting: a
	// dead member's requests fail and the writer goes on with the next
	kvs := make([]etcdserverpb.KVClient, len(endpoints))
	for i, e := range endpoints {
		c, err := grpc.Dial(e, grpc.WithInsecure())
		if err != nil {
			fmt.Println("dial:", err)
			os.Exit(1)
		}
		defer c.Close()
		kvs[i] = etcdserverpb.NewKVClient(c)
	}
	cur := 0
	kv := kvs[0]
	failover := func() {
		cur = (cur + 1) % len(kvs)
		kv = kvs[cur]
	}
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%c%d", *prefix, 'a'+i/4, i%4)
	}
	state := map[string]string{}
	var hist []ev
	var compactRev int64
	ctx, stopAll := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var watchers []*watcher

	var rr *etcdserverpb.RangeResponse
	var err error
	for t := 0; t < 100; t++ {
		if rr, err = kv.Range(ctx, &etcdserverpb.RangeRequest{Key: []byte(*prefix)}); err == nil {
			break
		}
		failover()
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		fmt.Println("range:", err)
		os.Exit(1)
	}
	rev := rr.Header.Revision
	baseRev := rev
	// one idle watcher per member: only progress responses come
	var idles []*watcher
	for i := 0; *progress && i < len(endpoints); i++ {
		w := &watcher{id: -2 - i, key: *prefix + "idle/", end: *prefix + "idle0", start: rev + 1, member: i, progress: true}
		idles = append(idles, w)
		wg.Add(1)
		go func() { defer wg.Done(); w.run(ctx) }()
	}
	val := func(i int) string {
		n := 1 + rng.Intn(*valueSize)
		return fmt.Sprintf("v%d-%s", i, strings.Repeat("x", n))
	}
	// landed: whether key k holds value v, and at which revision. It
	// reads until a read succeeds, and once more after a pause when the
	// value is not there, so that a put still on its way (taken by raftd
	// from a dead gateway's ring, or waiting for a restarted stored) has
	// landed before it is taken for lost.
	landed := func(ctx context.Context, k, v string) (int64, bool) {
		look := func() (int64, bool, bool) {
			g, ge := kv.Range(ctx, &etcdserverpb.RangeRequest{Key: []byte(k)})
			if ge != nil {
				failover()
				return 0, false, false
			}
			if len(g.Kvs) == 1 && string(g.Kvs[0].Value) == v {
				return g.Kvs[0].ModRevision, true, true
			}
			return 0, false, true
		}
		for pass := 0; pass < 2; pass++ {
			if pass == 1 {
				time.Sleep(time.Second)
			}
			for t := 0; t < 100; t++ {
				if mr, found, ok := look(); ok {
					if found {
						return mr, true
					}
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		return 0, false
	}
	retry := func(f func() error) error {
		var err error
		for t := 0; t < 100; t++ {
			if err = f(); err == nil {
				return nil
			}
			failover()
			time.Sleep(100 * time.Millisecond)
		}
		return err
	}
	for i := 0; i < *nops; i++ {
		spread := *nops
		if *early {
			spread = *nops / 10
		}
		if len(watchers) < *nwatch && (rng.Intn(spread / *nwatch + 1) == 0 || spread-i <= *nwatch-len(watchers)) {
			w := &watcher{id: len(watchers), slow: *slow && len(watchers)%2 == 0, member: len(watchers) % len(endpoints)}
			w.progress = *progress && rng.Intn(2) == 0
			switch rng.Intn(3) {
			case 0:
				w.key = keys[rng.Intn(len(keys))]
			case 1:
				a, b := rng.Intn(len(keys)), rng.Intn(len(keys))
				if a > b {
					a, b = b, a
				}
				w.key, w.end = keys[a], keys[b]+"z"
			default:
				w.key, w.end = keys[rng.Intn(len(keys))], "\x00"
			}
			lo := compactRev + 1
			if lo <= baseRev {
				lo = baseRev + 1
			}
			if rng.Intn(2) == 0 || rev+1 <= lo {
				w.start = rev + 1
			} else {
				w.start = lo + rng.Int63n(rev+1-lo)
			}
			w.noput = rng.Intn(6) == 0
			w.nodel = !w.noput && rng.Intn(6) == 0
			w.prevKV = rng.Intn(2) == 0
			watchers = append(watchers, w)
			wg.Add(1)
			go func() { defer wg.Done(); w.run(ctx) }()
		}
		op := rng.Intn(10)
		if *putsOnly {
			op = 0
		}
		k := keys[rng.Intn(len(keys))]
		switch {
		case op < 5: // put
			v := val(i)
			var r *etcdserverpb.PutResponse
			err = retry(func() (e error) {
				r, e = kv.Put(ctx, &etcdserverpb.PutRequest{Key: []byte(k), Value: []byte(v)})
				if e != nil && *putsOnly {
					// the put may have gone through (its answer was
					// lost with a killed process): find out before
					// putting the value again
					if mr, found := landed(ctx, k, v); found {
						r = &etcdserverpb.PutResponse{Header: &etcdserverpb.ResponseHeader{Revision: mr}}
						return nil
					}
				}
				return e
			})
			if err != nil {
				fmt.Println("put:", err)
				os.Exit(1)
			}
			p, ok := state[k]
			hist = append(hist, ev{rev: r.Header.Revision, key: k, value: v, prev: p, hasPr: ok})
			state[k] = v
			rev = r.Header.Revision
		case op < 7: // delete a key or a range
			end := ""
			if op == 6 {
				end = keys[rng.Intn(len(keys))] + "z"
			}
			r, err := kv.DeleteRange(ctx, &etcdserverpb.DeleteRangeRequest{Key: []byte(k), RangeEnd: []byte(end)})
			if err != nil {
				fmt.Println("delete:", err)
				os.Exit(1)
			}
			var ks []string
			for kk := range state {
				if (end == "" && kk == k) || (end != "" && kk >= k && kk < end) {
					ks = append(ks, kk)
				}
			}
			sort.Strings(ks)
			for _, kk := range ks {
				hist = append(hist, ev{rev: r.Header.Revision, del: true, key: kk, prev: state[kk], hasPr: true})
				delete(state, kk)
			}
			rev = r.Header.Revision
		case op < 9: // txn: two puts and a delete of other keys
			perm := rng.Perm(len(keys))
			a, b, d := keys[perm[0]], keys[perm[1]], keys[perm[2]]
			va, vb := val(i), val(i+1000000)
			r, err := kv.Txn(ctx, &etcdserverpb.TxnRequest{Success: []*etcdserverpb.RequestOp{
				{Request: &etcdserverpb.RequestOp_RequestPut{RequestPut: &etcdserverpb.PutRequest{Key: []byte(a), Value: []byte(va)}}},
				{Request: &etcdserverpb.RequestOp_RequestDeleteRange{RequestDeleteRange: &etcdserverpb.DeleteRangeRequest{Key: []byte(d)}}},
				{Request: &etcdserverpb.RequestOp_RequestPut{RequestPut: &etcdserverpb.PutRequest{Key: []byte(b), Value: []byte(vb)}}},
			}})
			if err != nil {
				fmt.Println("txn:", err)
				os.Exit(1)
			}
			tr := r.Header.Revision
			p, ok := state[a]
			hist = append(hist, ev{rev: tr, key: a, value: va, prev: p, hasPr: ok})
			state[a] = va
			if p, ok := state[d]; ok {
				hist = append(hist, ev{rev: tr, del: true, key: d, prev: p, hasPr: true})
				delete(state, d)
			}
			p, ok = state[b]
			hist = append(hist, ev{rev: tr, key: b, value: vb, prev: p, hasPr: ok})
			state[b] = vb
			rev = tr
		default: // compact a few revisions back
			c := rev - 20
			// not past the start of a watcher the member may not have
			// begun to catch up yet (etcd looks every 100 ms): that
			// one would be cancelled, rightly, but it is the model's
			// race
			for _, w := range append(idles, watchers...) {
				w.mu.Lock()
				if (w.createdAt.IsZero() || time.Since(w.createdAt) < 300*time.Millisecond) && w.start-1 < c {
					c = w.start - 1
				}
				w.mu.Unlock()
			}
			if !*slow && !*noCompact && c > compactRev && c > baseRev {
				if _, err := kv.Compact(ctx, &etcdserverpb.CompactionRequest{Revision: c}); err != nil {
					fmt.Println("compact:", err)
					os.Exit(1)
				}
				compactRev = c
			}
		}
	}
	// A watcher from before the last compaction is cancelled with it.
	var compacted *watcher
	if compactRev > 1 {
		compacted = &watcher{id: -1, key: *prefix, end: "\x00", start: 1}
		wg.Add(1)
		go func() { defer wg.Done(); compacted.run(ctx) }()
	}
	// every watcher gets to the end of its events, or the time runs out
	deadline := time.Now().Add(60 * time.Second)
	want := make([][]ev, len(watchers))
	for i, w := range watchers {
		for _, e := range hist {
			if e.rev >= w.start && inRange(w, e.key) && !(e.del && w.nodel) && !(!e.del && w.noput) {
				x := e
				if !w.prevKV {
					x.prev, x.hasPr = "", false
				}
				want[i] = append(want[i], x)
			}
		}
	}
	for _, w := range watchers {
		i := w.id
		for time.Now().Before(deadline) {
			w.mu.Lock()
			n := len(w.got)
			w.mu.Unlock()
			if n >= len(want[i]) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(300 * time.Millisecond) // anything extra arrives too
	bad := 0
	total := 0
	reconn := 0
	ncut := 0 // watchers a compaction cancelled
	for _, w := range watchers {
		i := w.id
		w.mu.Lock()
		got := w.got
		total += len(got)
		reconn += w.reconnects
		desc := fmt.Sprintf("watcher %d [%q,%q) from %d noput=%v nodel=%v prev=%v slow=%v", i, w.key, w.end, w.start, w.noput, w.nodel, w.prevKV, w.slow)
		if len(w.errs) > 0 {
			fmt.Println(desc, "errors:", w.errs)
			bad++
		}
		// clientv3-style resumption re-delivers nothing: each revision's
		// events came in one response
		seen := map[int64]bool{}
		for _, rv := range w.respRevs {
			for j, r := range rv {
				if j > 0 && r != rv[j-1] {
					continue
				}
				if j == 0 && seen[r] {
					fmt.Println(desc, "revision", r, "split over responses")
					bad++
				}
				seen[r] = true
			}
		}
		wi := want[i]
		if w.compactedAt > 0 {
			// cancelled by a compaction past what it still needed: a
			// compaction the writer made, and the events below it
			if w.compactedAt > compactRev {
				fmt.Println(desc, "cancelled at compaction", w.compactedAt, "past the last one made,", compactRev)
				bad++
			}
			ncut++
			k := 0
			for k < len(wi) && wi[k].rev < w.next {
				k++
			}
			wi = wi[:k]
		}
		if len(got) != len(wi) {
			fmt.Println(desc, "got", len(got), "events, want", len(wi))
			bad++
		}
		for j := 0; j < len(got) && j < len(wi); j++ {
			g, e := got[j], wi[j]
			if g.rev != e.rev || g.del != e.del || g.key != e.key || g.value != e.value || g.hasPr != e.hasPr || g.prev != e.prev {
				fmt.Printf("%s event %d: got %+v want %+v\n", desc, j, g, e)
				bad++
				break
			}
		}
		w.mu.Unlock()
	}
	if compacted != nil {
		time.Sleep(500 * time.Millisecond)
		compacted.mu.Lock()
		want := fmt.Sprintf("canceled: \"\" compact %d", compactRev)
		if len(compacted.errs) != 1 || compacted.errs[0] != want || len(compacted.got) != 0 {
			fmt.Println("watcher from revision 1 after compaction: got", compacted.errs, len(compacted.got), "events; want", want)
			bad++
		}
		compacted.mu.Unlock()
	}
	nprog, nticks := 0, 0
	for _, w := range watchers {
		w.mu.Lock()
		nprog += w.nprogress
		nticks += w.ticks
		w.mu.Unlock()
	}
	for _, w := range idles {
		heard := func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.plast >= rev && (!*cetcdProg || w.ticks > 0)
		}
		for end := time.Now().Add(20 * time.Second); !heard() && time.Now().Before(end); {
			time.Sleep(100 * time.Millisecond)
		}
		w.mu.Lock()
		desc := fmt.Sprintf("idle watcher on %s", endpoints[w.member])
		if len(w.errs) > 0 || len(w.got) > 0 {
			fmt.Println(desc, "errors:", w.errs, "events:", len(w.got))
			bad++
		}
		if w.plast < rev {
			fmt.Println(desc, "heard of revision", w.plast, "at most, want", rev)
			bad++
		}
		if *cetcdProg && w.ticks == 0 {
			fmt.Println(desc, "got no progress notification")
			bad++
		}
		nprog += w.nprogress
		nticks += w.ticks
		w.mu.Unlock()
	}
	stopAll()
	wg.Wait()
	if *progress {
		fmt.Println("progress", nprog)
		fmt.Println("ticks", nticks)
	}
	fmt.Println("events", total)
	fmt.Println("history", len(hist), "revision", rev, "compact", compactRev)
	fmt.Println("reconnects", reconn)
	fmt.Println("cancelled-by-compaction", ncut)
	if bad > 0 {
		fmt.Println("FAIL", bad)
		os.Exit(1)
	}
	fmt.Println("ok")
}
