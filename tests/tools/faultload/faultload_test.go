package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/etcdserver/api/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The checkers' tests: histories made by simulating a correct register
// must pass, and the same histories with one anomaly put in must not.
// (tests/integration/faultload_check.sh runs these and the crafted
// histories of tests/fault/testdata through the binary.)

func limits() checkLimits {
	return checkLimits{maxSteps: 1 << 40, deadline: time.Now().Add(time.Minute), text: "test"}
}

// simRegister makes the history of clients acting on keys of a correct
// (linearizable) register store: each operation takes effect at a point
// drawn inside its interval, in the order of those points. Some writes
// and cas are indeterminate (they took effect or not, the client cannot
// tell, and their interval has no end), some fail definitely (no effect).
func simRegister(seed int64, clients, keys, perClient int) []Op {
	rng := rand.New(rand.NewSource(seed))
	type pending struct {
		op    Op
		at    int64 // the point it takes effect (math.MaxInt64: never)
		index int
	}
	var all []*pending
	var written []string
	for c := 0; c < clients; c++ {
		t := int64(rng.Intn(100))
		proc := c
		for i := 0; i < perClient; i++ {
			op := Op{Proc: proc, Client: c, Ep: "e", Key: fmt.Sprintf("k%d", rng.Intn(keys))}
			op.Call = t
			dur := int64(1 + rng.Intn(200))
			op.Ret = t + dur
			p := &pending{op: op, at: t + rng.Int63n(dur+1)}
			switch r := rng.Intn(10); {
			case r < 4:
				p.op.F = "read"
			case r < 7:
				p.op.F = "write"
				p.op.Value = fmt.Sprintf("c%d-%d", c, i)
			default:
				p.op.F = "cas"
				p.op.Value = fmt.Sprintf("c%d-%d", c, i)
				if len(written) > 0 {
					p.op.Expect = written[rng.Intn(len(written))]
				}
			}
			if p.op.F != "read" {
				written = append(written, p.op.Value)
			}
			p.op.Type = typeOK
			switch r := rng.Intn(20); {
			case r == 0:
				p.op.Type = typeInfo
				if rng.Intn(2) == 0 {
					p.at = math.MaxInt64
				} else {
					p.at = t + rng.Int63n(5*dur+1) // may land after it gave up
				}
				proc += clients
			case r == 1:
				p.op.Type = typeFail
				p.at = math.MaxInt64
			}
			all = append(all, p)
			t += dur + int64(rng.Intn(50))
		}
	}
	for i, p := range all {
		p.index = i
	}
	order := append([]*pending(nil), all...)
	sort.SliceStable(order, func(i, j int) bool { return order[i].at < order[j].at })
	state := map[string]string{}
	for _, p := range order {
		if p.at == math.MaxInt64 {
			continue
		}
		op := &p.op
		cur, found := state[op.Key]
		switch op.F {
		case "read":
			op.Read, op.Found = cur, found
		case "write":
			state[op.Key] = op.Value
		case "cas":
			if cur == op.Expect {
				op.Succeeded = true
				state[op.Key] = op.Value
			} else {
				op.Read, op.Found = cur, found
			}
		}
	}
	var ops []Op
	end := int64(0)
	for _, p := range all {
		if p.op.Type == typeInfo && p.op.F == "read" {
			p.op.Read, p.op.Found = "", false
		}
		ops = append(ops, p.op)
		if p.op.Ret > end {
			end = p.op.Ret
		}
	}
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("k%d", k)
		v, found := state[key]
		ops = append(ops, Op{Proc: -1, Client: -1, F: "read", Final: true, Key: key, Type: typeOK,
			Call: end + 10000, Ret: end + 10001, Read: v, Found: found})
	}
	return ops
}

// nthOp is the index of the n-th operation (from 0) that is, or -1.
func nthOp(ops []Op, n int, is func(*Op) bool) int {
	for i := range ops {
		if is(&ops[i]) {
			if n == 0 {
				return i
			}
			n--
		}
	}
	return -1
}

// checkAs checks ops with the checker of workload w.
func checkAs(w string, ops []Op) summary {
	s := summary{workload: w}
	s.countOps(ops)
	checkers[w](ops, &s, limits())
	return s
}

func checkReg(ops []Op) summary { return checkAs("register", ops) }

func TestRegisterCorrectHistoriesPass(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		ops := simRegister(seed, 6, 2, 150)
		s := checkReg(ops)
		if !s.clean() || s.unknown != 0 {
			t.Fatalf("seed %d: a correct history fails: %s\n%s", seed, s.line(), strings.Join(s.details, "\n"))
		}
	}
}

// pickStale finds an ok read r and two acknowledged writes w1, w2 of its
// key with w1 returned before w2 was called and w2 returned before r was
// called: r reading w1's value is then a stale read.
func pickStale(ops []Op) (r int, stale string) {
	for i := range ops {
		if ops[i].F != "read" || ops[i].Type != typeOK || ops[i].Final {
			continue
		}
		for j := range ops {
			w2 := &ops[j]
			if w2.Key != ops[i].Key || !acked(w2) || w2.Ret >= ops[i].Call {
				continue
			}
			for k := range ops {
				w1 := &ops[k]
				if w1.Key == w2.Key && acked(w1) && w1.Ret < w2.Call && ops[i].Read != w1.Value {
					return i, w1.Value
				}
			}
		}
	}
	return -1, ""
}

func TestRegisterStaleReadFails(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		ops := simRegister(seed, 5, 2, 100)
		r, stale := pickStale(ops)
		if r < 0 {
			t.Fatalf("seed %d: no read to make stale", seed)
		}
		ops[r].Read, ops[r].Found = stale, true
		if s := checkReg(ops); s.anomalies == 0 {
			t.Fatalf("seed %d: a stale read passes: %s", seed, s.line())
		}
	}
}

func TestRegisterLostWriteCounted(t *testing.T) {
	tried := 0
	for seed := int64(1); seed <= 20; seed++ {
		ops := simRegister(seed, 5, 1, 100)
		// the final read answers with the value of an acknowledged
		// write before the last one, and no write that may have taken
		// effect after the last one is left (none returned after it was
		// called, none indeterminate)
		last := -1
		for i := range ops {
			if acked(&ops[i]) && (last < 0 || ops[i].Call > ops[last].Call) {
				last = i
			}
		}
		var kept []Op
		for i := range ops {
			if !(writes(&ops[i]) && i != last && (ops[i].Ret > ops[last].Call || ops[i].Type == typeInfo)) {
				kept = append(kept, ops[i])
			}
		}
		prev := ""
		for i := range kept {
			if acked(&kept[i]) && kept[i].Ret < ops[last].Call && kept[i].Value != ops[last].Value {
				prev = kept[i].Value
			}
		}
		if prev == "" {
			continue
		}
		tried++
		final := &kept[len(kept)-1]
		final.Read, final.Found = prev, true
		s := checkReg(kept)
		if s.lost == 0 || s.anomalies == 0 {
			t.Fatalf("seed %d: a lost write is not counted: %s\n%s", seed, s.line(), strings.Join(s.details, "\n"))
		}
	}
	if tried < 10 {
		t.Fatalf("only %d of 20 histories had a write to lose", tried)
	}
}

func TestRegisterCasOnWrongValueFails(t *testing.T) {
	ops := []Op{
		{Proc: 0, F: "write", Key: "k", Value: "a", Call: 0, Ret: 10, Type: typeOK},
		{Proc: 1, F: "write", Key: "k", Value: "b", Call: 20, Ret: 30, Type: typeOK},
		{Proc: 2, F: "cas", Key: "k", Expect: "a", Value: "c", Succeeded: true, Call: 40, Ret: 50, Type: typeOK},
	}
	if s := checkReg(ops); s.anomalies != 1 {
		t.Fatalf("cas against an overwritten value: %s", s.line())
	}
	// the same with the second write indeterminate: it may land after
	// the cas, so the history is linearizable
	ops[1].Type = typeInfo
	if s := checkReg(ops); !s.clean() {
		t.Fatalf("cas before an indeterminate write: %s\n%s", s.line(), strings.Join(s.details, "\n"))
	}
}

func TestRegisterIndeterminateNotBeforeCall(t *testing.T) {
	ops := []Op{
		{Proc: 0, F: "read", Key: "k", Read: "a", Found: true, Call: 0, Ret: 10, Type: typeOK},
		{Proc: 1, F: "write", Key: "k", Value: "a", Call: 20, Ret: 30, Type: typeInfo},
	}
	if s := checkReg(ops); s.anomalies == 0 {
		t.Fatalf("a read before the write was called passes: %s", s.line())
	}
	ops[1].Call = 5
	if s := checkReg(ops); !s.clean() {
		t.Fatalf("a read concurrent with an indeterminate write fails: %s\n%s", s.line(), strings.Join(s.details, "\n"))
	}
}

func TestRegisterSearchLimit(t *testing.T) {
	ops := simRegister(7, 6, 1, 400)
	s := summary{}
	lim := limits()
	lim.maxSteps = 10
	checkRegister(ops, &s, lim)
	if s.unknown != 1 || !strings.HasPrefix(s.details[len(s.details)-1], "unknown:") {
		t.Fatalf("the step limit does not give unknown: %s %v", s.line(), s.details)
	}
	s = summary{}
	lim = limits()
	lim.deadline = time.Now()
	checkRegister(ops, &s, lim)
	if s.unknown != 1 {
		t.Fatalf("the deadline does not give unknown: %s", s.line())
	}
}

func TestOutcome(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, typeOK},
		{context.DeadlineExceeded, typeInfo},
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), typeInfo},
		{rpctypes.ErrGRPCNoLeader, typeInfo},
		{rpctypes.ErrGRPCTimeout, typeInfo},
		{status.Error(codes.Unavailable, "transport is closing"), typeInfo},
		{status.Error(codes.Unknown, "raft proposal dropped"), typeFail},
		{status.Error(codes.Unknown, "something else"), typeInfo},
		{rpctypes.ErrGRPCRequestTooManyRequests, typeFail},
		{rpctypes.ErrTimeout, typeInfo},
		{rpctypes.ErrNoSpace, typeFail},
		{rpctypes.ErrGRPCRequestTooLarge, typeFail},
		{fmt.Errorf("not a status"), typeInfo},
	}
	for _, c := range cases {
		if got, _ := outcome(c.err); got != c.want {
			t.Errorf("outcome(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

func TestLongestUnavail(t *testing.T) {
	ms := int64(time.Millisecond)
	ops := []Op{
		{F: "read", Call: 0, Ret: 5 * ms, Type: typeOK},
		{F: "read", Call: 6 * ms, Ret: 900 * ms, Type: typeInfo},
		{F: "read", Call: 10 * ms, Ret: 400 * ms, Type: typeOK},
		{F: "read", Call: 401 * ms, Ret: 450 * ms, Type: typeOK},
		{F: "read", Call: 2000 * ms, Ret: 2001 * ms, Type: typeOK, Final: true},
	}
	s := summary{}
	s.countOps(ops)
	if s.longestUnavailMs != 450 || s.ok != 4 || s.info != 1 {
		t.Fatalf("longest_unavail_ms %d ok %d info %d, want 450 (450..900 ms) 4 1", s.longestUnavailMs, s.ok, s.info)
	}
}

// simTxn makes the history of the txn workload on a correct store: each
// client reads a few keys, then commits new values to them if none was
// modified since; each operation takes effect at a point inside its
// interval, in the order of those points, and each commit takes the next
// revision. Some txns are indeterminate (taking effect or not, maybe
// after the client gave up), some fail definitely.
func simTxn(seed int64, clients, keys, perClient int) []Op {
	rng := rand.New(rand.NewSource(seed))
	type pending struct {
		op   Op
		at   int64
		read *pending
	}
	var all []*pending
	for c := 0; c < clients; c++ {
		t := int64(rng.Intn(100))
		proc := c
		for i := 0; i < perClient; i++ {
			var mine []string
			for _, k := range rng.Perm(keys)[:1+rng.Intn(keys)] {
				mine = append(mine, fmt.Sprintf("k%d", k))
			}
			dur := int64(1 + rng.Intn(100))
			read := &pending{op: Op{Proc: proc, Client: c, F: "read", Type: typeOK, Call: t, Ret: t + dur}, at: t + rng.Int63n(dur+1)}
			for _, k := range mine {
				read.op.Reads = append(read.op.Reads, KV{Key: k})
			}
			t += dur + int64(rng.Intn(20))
			dur = int64(1 + rng.Intn(100))
			txn := &pending{op: Op{Proc: proc, Client: c, F: "txn", Type: typeOK, Call: t, Ret: t + dur}, at: t + rng.Int63n(dur+1), read: read}
			for _, k := range mine {
				txn.op.Writes = append(txn.op.Writes, KV{Key: k, Value: fmt.Sprintf("c%d-%d", c, i), Found: true})
			}
			switch rng.Intn(15) {
			case 0:
				txn.op.Type = typeInfo
				if rng.Intn(2) == 0 {
					txn.at = math.MaxInt64
				} else {
					txn.at = t + rng.Int63n(4*dur+1)
				}
				proc += clients
			case 1:
				txn.op.Type = typeFail
				txn.at = math.MaxInt64
			}
			all = append(all, read, txn)
			t += dur + int64(rng.Intn(20))
		}
	}
	order := append([]*pending(nil), all...)
	sort.SliceStable(order, func(i, j int) bool { return order[i].at < order[j].at })
	state := map[string]KV{}
	rev := int64(1)
	snapshot := func(kvs []KV) []KV {
		out := make([]KV, len(kvs))
		for i, kv := range kvs {
			out[i] = state[kv.Key]
			out[i].Key = kv.Key
		}
		return out
	}
	for _, p := range order {
		if p.at == math.MaxInt64 {
			continue
		}
		op := &p.op
		if op.F == "read" {
			op.Reads = snapshot(op.Reads)
			op.Rev = rev
			continue
		}
		op.Reads = p.read.op.Reads
		op.Succeeded = true
		for _, kv := range op.Reads {
			if state[kv.Key].Mod != kv.Mod {
				op.Succeeded = false
			}
		}
		if !op.Succeeded {
			op.Else = snapshot(op.Reads)
			op.Rev = rev
			continue
		}
		rev++
		for _, w := range op.Writes {
			state[w.Key] = KV{Key: w.Key, Value: w.Value, Found: true, Mod: rev}
		}
		op.Rev = rev
	}
	var ops []Op
	end := int64(0)
	for _, p := range all {
		if p.op.F == "txn" && p.op.Type != typeOK {
			p.op.Reads = p.read.op.Reads
			p.op.Rev, p.op.Succeeded, p.op.Else = 0, false, nil
		}
		ops = append(ops, p.op)
		if p.op.Ret > end {
			end = p.op.Ret
		}
	}
	final := Op{Proc: -1, Client: -1, F: "read", Final: true, Type: typeOK, Call: end + 10, Ret: end + 11, Rev: rev}
	for k := 0; k < keys; k++ {
		final.Reads = append(final.Reads, KV{Key: fmt.Sprintf("k%d", k)})
	}
	final.Reads = snapshot(final.Reads)
	return append(ops, final)
}

func TestTxnCorrectHistoriesPass(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		ops := simTxn(seed, 5, 3, 100)
		s := checkAs("txn", ops)
		if !s.clean() {
			t.Fatalf("seed %d: a correct history fails: %s\n%s", seed, s.line(), strings.Join(s.details, "\n"))
		}
		if s.info == 0 || s.fail == 0 {
			t.Fatalf("seed %d: no indeterminate or failed txn to check", seed)
		}
	}
}

// Each mutation makes a correct history wrong in one way; the checker
// must say so.
func TestTxnAnomaliesFail(t *testing.T) {
	committed := func(ops []Op, from int) int {
		for i := from; i < len(ops); i++ {
			if ops[i].F == "txn" && ops[i].Type == typeOK && ops[i].Succeeded {
				return i
			}
		}
		return -1
	}
	mutations := map[string]func([]Op) bool{
		// a committed txn read an older value of a key than the one
		// committed last before it
		"stale read": func(ops []Op) bool {
			for i := committed(ops, 0); i >= 0; i = committed(ops, i+1) {
				for j := range ops[i].Reads {
					r := &ops[i].Reads[j]
					for k := range ops {
						w := &ops[k]
						if w.F == "txn" && w.Type == typeOK && w.Succeeded && w.Rev < r.Mod && len(w.Writes) > 0 && w.Writes[0].Key == r.Key {
							r.Value, r.Mod = w.Writes[0].Value, w.Rev
							return true
						}
					}
				}
			}
			return false
		},
		// a commit the final read does not show
		"lost commit": func(ops []Op) bool {
			f := &ops[len(ops)-1]
			for j := range f.Reads {
				if f.Reads[j].Found {
					f.Reads[j] = KV{Key: f.Reads[j].Key}
					return true
				}
			}
			return false
		},
		// two commits swapped against real time
		"real time": func(ops []Op) bool {
			for i := committed(ops, 0); i >= 0; i = committed(ops, i+1) {
				for j := committed(ops, 0); j >= 0; j = committed(ops, j+1) {
					if ops[i].Ret < ops[j].Call && ops[i].Rev+1 < ops[j].Rev {
						ops[j].Call, ops[j].Ret = ops[i].Call-20, ops[i].Call-10
						return true
					}
				}
			}
			return false
		},
		// a read of a value nobody wrote
		"never written": func(ops []Op) bool {
			for i := range ops {
				if ops[i].F == "read" && len(ops[i].Reads) > 0 && ops[i].Reads[0].Found {
					ops[i].Reads[0].Value = "zz"
					return true
				}
			}
			return false
		},
	}
	for name, mutate := range mutations {
		for seed := int64(1); seed <= 10; seed++ {
			ops := simTxn(seed, 5, 3, 100)
			if !mutate(ops) {
				t.Fatalf("%s, seed %d: nothing to mutate", name, seed)
			}
			if s := checkAs("txn", ops); s.anomalies == 0 {
				t.Fatalf("%s, seed %d: passes: %s", name, seed, s.line())
			}
		}
	}
}

// simWatch makes the history of the watch workload on a correct store:
// puts commit one revision each (some indeterminate ones too, some
// definite failures do not), and three watchers get every event of the
// range from revision 1 in batches, one of them with reconnections
// (opened again from the revision after the last event) and one with a
// cancellation for compaction (opened again from the compact revision,
// the revisions below it not delivered), up to the end marker.
func simWatch(seed int64, puts int) []Op {
	rng := rand.New(rand.NewSource(seed))
	var ops []Op
	var events []Event
	last := map[string]Event{}
	rev := int64(0)
	t := int64(0)
	for i := 0; i < puts; i++ {
		t += 10
		op := Op{Proc: i % 4, Client: i % 4, F: "write", Key: fmt.Sprintf("k%d", rng.Intn(3)), Value: fmt.Sprintf("v%d", i),
			Call: t, Ret: t + 5, Type: typeOK}
		applied := true
		switch rng.Intn(12) {
		case 0:
			op.Type = typeInfo
			applied = rng.Intn(2) == 0
		case 1:
			op.Type, applied = typeFail, false
		}
		if applied {
			rev++
			if op.Type == typeOK {
				op.Rev = rev
			}
			e := Event{Type: "put", Key: op.Key, Value: op.Value, Mod: rev}
			if p, ok := last[op.Key]; ok {
				e.PrevVal, e.PrevMod = p.Value, p.Mod
			}
			last[op.Key] = e
			events = append(events, e)
		}
		ops = append(ops, op)
	}
	for w := 10; w < 13; w++ {
		at := int64(0)
		add := func(op Op) {
			at++
			op.Proc, op.Client, op.Call, op.Ret = w, w, at, at
			ops = append(ops, op)
		}
		add(Op{F: "watch-open", Type: typeOK, StartRev: 1})
		for i := 0; i < len(events); {
			switch r := rng.Intn(20); {
			case w == 11 && r == 0:
				add(Op{F: "watch-cancel", Type: typeFail, Err: "Unavailable: etcdserver: no leader"})
				add(Op{F: "watch-open", Type: typeOK, StartRev: events[i].Mod})
			case w == 12 && r == 0 && i+3 < len(events):
				i += 3
				add(Op{F: "watch-cancel", Type: typeFail, CompactRev: events[i].Mod})
				add(Op{F: "watch-open", Type: typeOK, StartRev: events[i].Mod})
			}
			n := 1 + rng.Intn(3)
			if i+n > len(events) {
				n = len(events) - i
			}
			add(Op{F: "watch", Type: typeOK, Events: append([]Event(nil), events[i:i+n]...)})
			i += n
		}
		add(Op{F: "watch-end", Type: typeOK, Final: true, Rev: rev})
	}
	final := Op{Proc: -1, Client: -1, F: "read", Final: true, Type: typeOK, Call: t + 100, Ret: t + 101, Rev: rev}
	for _, e := range last {
		final.Reads = append(final.Reads, KV{Key: e.Key, Value: e.Value, Found: true, Mod: e.Mod})
	}
	return append(ops, final)
}

func TestWatchCorrectHistoriesPass(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		s := checkAs("watch", simWatch(seed, 300))
		if !s.clean() {
			t.Fatalf("seed %d: a correct history fails: %s\n%s", seed, s.line(), strings.Join(s.details, "\n"))
		}
	}
}

func TestWatchAnomaliesFail(t *testing.T) {
	// watchOp is the index of the n-th watch answer of watcher w
	watchOp := func(ops []Op, w, n int) int {
		return nthOp(ops, n, func(op *Op) bool { return op.F == "watch" && op.Client == w })
	}
	cases := []struct {
		name   string
		mutate func([]Op)
		field  func(summary) int
	}{
		{"an event lost", func(ops []Op) {
			i := watchOp(ops, 10, 20)
			ops[i].Events = ops[i].Events[1:]
		}, func(s summary) int { return s.watchGaps }},
		{"an event again", func(ops []Op) {
			i, j := watchOp(ops, 10, 20), watchOp(ops, 10, 25)
			ops[j].Events = append(ops[j].Events, ops[i].Events[0])
		}, func(s summary) int { return s.watchDups }},
		{"the rest of the events lost", func(ops []Op) {
			for i := watchOp(ops, 11, 30); i < len(ops); i++ {
				if ops[i].F == "watch" && ops[i].Client == 11 {
					ops[i].Events = nil
				}
			}
		}, func(s summary) int { return s.watchGaps }},
		{"a wrong prev_kv", func(ops []Op) {
			i := watchOp(ops, 10, 40)
			ops[i].Events[0].PrevMod, ops[i].Events[0].PrevVal = 0, ""
		}, func(s summary) int { return s.anomalies }},
		{"a value never written", func(ops []Op) {
			i := watchOp(ops, 12, 10)
			ops[i].Events[0].Value = "zz"
		}, func(s summary) int { return s.anomalies }},
		{"events out of order", func(ops []Op) {
			i, j := watchOp(ops, 10, 30), watchOp(ops, 10, 31)
			ops[i].Events, ops[j].Events = ops[j].Events, ops[i].Events
		}, func(s summary) int { return s.anomalies }},
	}
	for _, c := range cases {
		for seed := int64(1); seed <= 10; seed++ {
			ops := simWatch(seed, 300)
			c.mutate(ops)
			if s := checkAs("watch", ops); c.field(s) == 0 {
				t.Fatalf("%s, seed %d: not found: %s", c.name, seed, s.line())
			}
		}
	}
}

// simLock makes the history of the lock workload on a correct server:
// holds one after the other, by clients drawn at random; now and then a
// holder whose lease was not surely alive to the end (valid_ns before
// its unlock) with the next holder taking the lock after that point but
// before the unlock, and now and then a lock that timed out.
func simLock(seed int64, holds int) []Op {
	rng := rand.New(rand.NewSource(seed))
	var ops []Op
	t := int64(0)
	busy := map[int]int64{} // when each client's last operation returns
	for i := 0; i < holds; i++ {
		var free []int
		for len(free) == 0 {
			for c := 0; c < 4; c++ {
				if busy[c] <= t {
					free = append(free, c)
				}
			}
			t++
		}
		c := free[rng.Intn(len(free))]
		key := fmt.Sprintf("lock/%d-%d", c, i)
		add := func(op Op, call, ret int64) {
			op.Proc, op.Client, op.Call, op.Ret = c, c, call, ret
			busy[c] = ret
			if op.Type == "" {
				op.Type = typeOK
			}
			ops = append(ops, op)
		}
		if rng.Intn(10) == 0 {
			add(Op{F: "lock", Type: typeInfo}, t, t+50)
			t += 5
			continue
		}
		add(Op{F: "lock", LockKey: key}, t, t+5)
		add(Op{F: "marker-write", Key: "marker", Value: key}, t+6, t+7)
		add(Op{F: "holder-read", Key: key, Found: true}, t+8, t+9)
		add(Op{F: "marker-read", Key: "marker", Read: key, Found: true}, t+10, t+11)
		if rng.Intn(8) == 0 {
			// the lease went unseen from t+12: the next holder may come
			// in before this one's unlock
			add(Op{F: "unlock", LockKey: key, ValidNs: t + 12}, t+40, t+41)
			t += 13
			continue
		}
		add(Op{F: "unlock", LockKey: key, ValidNs: t + 20}, t+20, t+21)
		t += 21 + int64(rng.Intn(3))
	}
	return ops
}

func TestLockCorrectHistoriesPass(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		if s := checkAs("lock", simLock(seed, 300)); !s.clean() {
			t.Fatalf("seed %d: a correct history fails: %s\n%s", seed, s.line(), strings.Join(s.details, "\n"))
		}
	}
}

func TestLockAnomaliesFail(t *testing.T) {
	nth := func(ops []Op, f string, n int) int {
		return nthOp(ops, n, func(op *Op) bool { return op.F == f && op.Type == typeOK })
	}
	cases := []struct {
		name   string
		mutate func([]Op) bool
		field  func(summary) int
	}{
		{"a lock taken while another client held it", func(ops []Op) bool {
			for n := 10; n < 200; n++ {
				a, b := nth(ops, "lock", n), nth(ops, "lock", n+1)
				if ops[a].Client != ops[b].Client {
					ops[b].Ret = ops[a].Ret + 1
					return true
				}
			}
			return false
		}, func(s summary) int { return s.doubleHolders }},
		{"a lease kept alive past the next holder's lock", func(ops []Op) bool {
			for i := range ops {
				if ops[i].F == "unlock" && ops[i].ValidNs < ops[i].Call {
					for j := i + 1; j < len(ops); j++ {
						if ops[j].F == "lock" && ops[j].Type == typeOK && ops[j].Ret < ops[i].Call {
							ops[i].ValidNs = ops[i].Call
							return true
						}
					}
				}
			}
			return false
		}, func(s summary) int { return s.doubleHolders }},
		{"a holder's key gone", func(ops []Op) bool {
			ops[nth(ops, "holder-read", 30)].Found = false
			return true
		}, func(s summary) int { return s.anomalies }},
		{"a marker no holder wrote", func(ops []Op) bool {
			ops[nth(ops, "marker-read", 30)].Read = "zz"
			return true
		}, func(s summary) int { return s.anomalies }},
	}
	for _, c := range cases {
		for seed := int64(1); seed <= 10; seed++ {
			ops := simLock(seed, 300)
			if !c.mutate(ops) {
				t.Fatalf("%s, seed %d: nothing to mutate", c.name, seed)
			}
			if s := checkAs("lock", ops); c.field(s) == 0 {
				t.Fatalf("%s, seed %d: not found: %s", c.name, seed, s.line())
			}
		}
	}
}

func TestLeaseValidUntil(t *testing.T) {
	s := int64(time.Second)
	cases := []struct {
		acks           []int64
		from, to, want int64
	}{
		{[]int64{0, 3 * s / 2, 3 * s}, s, 6 * s, 6 * s},        // answers often enough
		{[]int64{0, 3 * s / 2}, s, 7 * s, 11 * s / 2},          // no answer after 1.5 s
		{[]int64{0, 5 * s, 6 * s}, s, 6 * s, 4 * s},            // a 5 s gap
		{[]int64{0}, 5 * s, 6 * s, 5 * s},                      // gone before the hold
		{[]int64{0, 2 * s, 4 * s, 9 * s}, 3 * s, 5 * s, 5 * s}, // a later gap does not matter
	}
	for i, c := range cases {
		l := &lease{ttl: 5 * time.Second, acks: c.acks}
		if got := l.validUntil(c.from, c.to); got != c.want {
			t.Errorf("case %d: validUntil(%d, %d) = %d, want %d (ttl 5 s, margin %v)", i, c.from, c.to, got, c.want, lockMargin)
		}
	}
}

// An indeterminate write needed only through an indeterminate cas that
// expected it, whose own value an ok read saw: both took effect, in
// that order, before the read returned.
func TestRegisterIndeterminateChain(t *testing.T) {
	ops := []Op{
		{Proc: 0, F: "write", Key: "k", Value: "a", Call: 0, Ret: 100, Type: typeInfo},
		{Proc: 1, F: "cas", Key: "k", Expect: "a", Value: "b", Call: 10, Ret: 100, Type: typeInfo},
		{Proc: 2, F: "read", Key: "k", Read: "b", Found: true, Call: 50, Ret: 60, Type: typeOK},
		{Proc: 2, F: "read", Key: "k", Call: 1, Ret: 5, Type: typeOK},
	}
	if s := checkReg(ops); !s.clean() {
		t.Fatalf("a chain of indeterminate operations: %s\n%s", s.line(), strings.Join(s.details, "\n"))
	}
	// the read of b returns before the cas was called
	ops[2].Call, ops[2].Ret = 6, 8
	if s := checkReg(ops); s.anomalies == 0 {
		t.Fatalf("a read before the cas that wrote its value passes: %s", s.line())
	}
	// the write of a must come before the read of b returned, so an ok
	// read of the key absent after that is stale
	ops[2].Call, ops[2].Ret = 50, 60
	ops = append(ops, Op{Proc: 3, F: "read", Key: "k", Call: 70, Ret: 80, Type: typeOK})
	if s := checkReg(ops); s.anomalies == 0 {
		t.Fatalf("a read of the key absent after the chain passes: %s", s.line())
	}
}

// What keeps the search short: 16,000 operations on one key, one in
// twenty indeterminate, need about 550,000 steps; with every
// indeterminate write and cas kept (not only those of needed values),
// the indeterminate ones that never took effect stay in the search
// forever, and it takes ten times as many.
func TestRegisterSearchSteps(t *testing.T) {
	s := summary{}
	lim := limits()
	lim.maxSteps = 2000000
	checkRegister(simRegister(3, 8, 1, 2000), &s, lim)
	if !s.clean() || s.unknown != 0 {
		t.Fatalf("over 2,000,000 steps: %s %v", s.line(), s.details)
	}
}

// A committed txn the final read does not show is lost; an indeterminate
// one is not, whether or not the final read shows it.
func TestTxnLostCounted(t *testing.T) {
	tried := 0
	for seed := int64(1); seed <= 20; seed++ {
		ops := simTxn(seed, 5, 3, 100)
		f := &ops[len(ops)-1]
		mutated := false
		for j := range f.Reads {
			r := &f.Reads[j]
			for i := range ops {
				w := &ops[i]
				if !mutated && r.Found && w.F == "txn" && w.Type == typeOK && w.Succeeded && w.Rev == r.Mod {
					f.Reads[j] = KV{Key: r.Key}
					mutated = true
				}
			}
		}
		if !mutated {
			continue
		}
		tried++
		if s := checkAs("txn", ops); s.lost != 1 || s.anomalies == 0 {
			t.Fatalf("seed %d: a lost txn is not counted once: %s\n%s", seed, s.line(), strings.Join(s.details, "\n"))
		}
	}
	if tried < 10 {
		t.Fatalf("only %d of 20 histories had a committed txn the final read shows", tried)
	}
	write := func(v string) []KV { return []KV{{Key: "a", Value: v, Found: true}} }
	base := []Op{
		{Proc: 0, F: "txn", Call: 10, Ret: 20, Type: typeOK, Rev: 2, Succeeded: true, Reads: []KV{{Key: "a"}}, Writes: write("v1")},
		{Proc: 1, F: "txn", Call: 30, Ret: 900, Type: typeInfo, Reads: []KV{{Key: "a", Value: "v1", Found: true, Mod: 2}}, Writes: write("v2")},
	}
	final := func(kv KV, rev int64) Op {
		return Op{Proc: -1, F: "read", Final: true, Call: 1000, Ret: 1010, Type: typeOK, Rev: rev, Reads: []KV{kv}}
	}
	for name, c := range map[string]struct {
		final Op
		lost  int
	}{
		"indeterminate not applied":          {final(KV{Key: "a", Value: "v1", Found: true, Mod: 2}, 2), 0},
		"indeterminate applied":              {final(KV{Key: "a", Value: "v2", Found: true, Mod: 3}, 3), 0},
		"the committed txn and its key gone": {final(KV{Key: "a"}, 3), 1},
	} {
		ops := append(append([]Op(nil), base...), c.final)
		if s := checkAs("txn", ops); s.lost != c.lost || (c.lost == 0) != s.clean() {
			t.Errorf("%s: %s\n%s", name, s.line(), strings.Join(s.details, "\n"))
		}
	}
	// a committed txn no one saw, overwritten by one that compared the
	// key as it was before it
	ops := []Op{base[0],
		{Proc: 1, F: "txn", Call: 30, Ret: 40, Type: typeOK, Rev: 3, Succeeded: true, Reads: []KV{{Key: "a"}}, Writes: write("v2")},
		final(KV{Key: "a", Value: "v2", Found: true, Mod: 3}, 3)}
	if s := checkAs("txn", ops); s.lost != 1 || !strings.Contains(strings.Join(s.details, "\n"), "never seen") {
		t.Errorf("a txn overwritten unseen: %s\n%s", s.line(), strings.Join(s.details, "\n"))
	}
}

// simLease makes the history of the lease workload on a correct server:
// leases granted, one or two keys attached, some kept alive (a few
// keepalives each, now and then an indeterminate one that renewed or
// not), each revoked some time after its last renewal + TTL (its keys
// deleted at one revision, seen by a watcher a little later), then
// probed (a keepalive and a write told the lease is gone); the final
// read finds nothing.
func simLease(seed int64, n int) []Op {
	rng := rand.New(rand.NewSource(seed))
	const s = int64(time.Second)
	type event struct {
		at    int64
		keys  []string
		put   bool
		value string
	}
	var ops []Op
	var events []event
	t := int64(0)
	end := int64(0)
	for i := 0; i < n; i++ {
		c := i % 4
		id := int64(100 + i)
		ttl := int64(2 + rng.Intn(3))
		t += int64(rng.Intn(int(s)))
		add := func(op Op, call, ret int64) {
			op.Proc, op.Client, op.Call, op.Ret, op.Lease = c, c, call, ret, id
			if op.Type == "" {
				op.Type = typeOK
			}
			ops = append(ops, op)
		}
		at := t
		handled := at + int64(rng.Intn(int(s/50)))
		add(Op{F: "grant", TTL: ttl}, at, handled+int64(rng.Intn(int(s/50))))
		expiry := handled + ttl*s
		var keys []string
		for k := 0; k <= rng.Intn(2); k++ {
			at += s / 20
			key := fmt.Sprintf("k%d-%d", id, k)
			keys = append(keys, key)
			add(Op{F: "write", Key: key, Value: key}, at, at+s/100)
			events = append(events, event{at: at + s/200, keys: []string{key}, put: true, value: key})
		}
		if rng.Intn(5) < 3 {
			for k := 1 + rng.Intn(6); k > 0; k-- {
				at += ttl * s / 3
				h := at + int64(rng.Intn(int(s/10)))
				if rng.Intn(8) == 0 {
					add(Op{F: "keepalive", Type: typeInfo}, at, at+2*s)
					if rng.Intn(2) == 0 {
						expiry = h + ttl*s
					}
					at += 2 * s
					break // the client goes on; a correct server may have let it lapse
				}
				add(Op{F: "keepalive", TTL: ttl}, at, h+int64(rng.Intn(int(s/10))))
				expiry = h + ttl*s
			}
		}
		gone := expiry + int64(rng.Intn(int(s)))
		events = append(events, event{at: gone, keys: keys})
		probe := gone + s/2 + int64(rng.Intn(int(s)))
		add(Op{F: "keepalive", Type: typeFail, Gone: true}, probe, probe+s/100)
		add(Op{F: "write", Key: fmt.Sprintf("k%d-late", id), Value: "late", Type: typeFail, Gone: true}, probe+s/50, probe+s/50+s/100)
		if probe > end {
			end = probe
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].at < events[j].at })
	rev := int64(1)
	for _, e := range events {
		rev++
		w := Op{Proc: 50, Client: 50, F: "watch", Type: typeOK, Rev: rev}
		w.Call = e.at + int64(rng.Intn(int(s/20)))
		w.Ret = w.Call
		for _, k := range e.keys {
			ev := Event{Type: "delete", Key: k, Mod: rev}
			if e.put {
				ev = Event{Type: "put", Key: k, Value: e.value, Mod: rev}
			}
			w.Events = append(w.Events, ev)
		}
		ops = append(ops, w)
	}
	final := end + 15*s
	return append(ops, Op{Proc: -1, Client: -1, F: "read", Final: true, Type: typeOK, Call: final, Ret: final + 1, Rev: rev})
}

func TestLeaseCorrectHistoriesPass(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		s := checkAs("lease", simLease(seed, 60))
		if !s.clean() || len(s.details) != 0 {
			t.Fatalf("seed %d: a correct history fails: %s\n%s", seed, s.line(), strings.Join(s.details, "\n"))
		}
	}
}

func TestLeaseAnomaliesFail(t *testing.T) {
	// deleteOf is the index of the watch answer deleting key, or -1
	deleteOf := func(ops []Op, key string) int {
		return nthOp(ops, 0, func(op *Op) bool {
			return op.F == "watch" && len(op.Events) > 0 && op.Events[0].Type == "delete" && op.Events[0].Key == key
		})
	}
	keysOf := func(ops []Op, lease int64) []string {
		var keys []string
		for i := range ops {
			if ops[i].F == "write" && ops[i].Lease == lease && ops[i].Type == typeOK {
				keys = append(keys, ops[i].Key)
			}
		}
		return keys
	}
	cases := []struct {
		name   string
		want   string // in the report
		mutate func([]Op) []Op
	}{
		{"a key deleted before its lease's renewal ran out", "while the lease was surely alive", func(ops []Op) []Op {
			for i := range ops {
				if ops[i].F == "keepalive" && ops[i].Type == typeOK {
					// the lease said to live a minute more
					ops[i].TTL = 60
					return ops
				}
			}
			return nil
		}},
		{"a lease said gone while surely alive", "said gone while surely alive", func(ops []Op) []Op {
			for i := range ops {
				if ops[i].F == "grant" && ops[i].Type == typeOK {
					j := nthOp(ops, 0, func(op *Op) bool { return op.Lease == ops[i].Lease && op.F == "write" })
					ops[j].Type, ops[j].Gone = typeFail, true
					return ops
				}
			}
			return nil
		}},
		{"a lease renewed after it was gone", "used after it was gone", func(ops []Op) []Op {
			for i := range ops {
				if ops[i].F == "keepalive" && ops[i].Gone {
					ops[i].Type, ops[i].Gone, ops[i].TTL = typeOK, false, 3
					return ops
				}
			}
			return nil
		}},
		{"a key attached to a lease after it was gone", "used after it was gone", func(ops []Op) []Op {
			for i := range ops {
				if ops[i].F == "write" && ops[i].Gone {
					ops[i].Type, ops[i].Gone = typeOK, false
					// the other probe says nothing
					for j := range ops {
						if ops[j].F == "keepalive" && ops[j].Lease == ops[i].Lease && ops[j].Gone {
							ops[j].Type, ops[j].Gone = typeInfo, false
						}
					}
					return ops
				}
			}
			return nil
		}},
		{"a key put again after its lease's delete", "put again", func(ops []Op) []Op {
			k := keysOf(ops, 100)[0]
			d := ops[deleteOf(ops, k)]
			ops = append(ops[:len(ops)-1], Op{Proc: 50, Client: 50, F: "watch", Type: typeOK, Call: d.Call + 1, Ret: d.Call + 1,
				Events: []Event{{Type: "put", Key: k, Value: k, Mod: d.Events[0].Mod + 1000}}}, ops[len(ops)-1])
			return ops
		}},
		{"a key deleted twice", "deleted twice", func(ops []Op) []Op {
			k := keysOf(ops, 100)[0]
			d := ops[deleteOf(ops, k)]
			return append(ops[:len(ops)-1], Op{Proc: 51, Client: 51, F: "watch", Type: typeOK, Call: d.Call + 1, Ret: d.Call + 1,
				Events: []Event{{Type: "delete", Key: k, Mod: d.Events[0].Mod + 1000}}}, ops[len(ops)-1])
		}},
		{"a lease's keys deleted at two revisions", "deleted at 2 revisions", func(ops []Op) []Op {
			for id := int64(100); id < 160; id++ {
				if keys := keysOf(ops, id); len(keys) == 2 {
					d := &ops[deleteOf(ops, keys[0])]
					d.Events[1].Mod += 1000
					return ops
				}
			}
			return nil
		}},
		{"a lapsed lease's key still there at the final read", "still there at the final read", func(ops []Op) []Op {
			f := &ops[len(ops)-1]
			f.Reads = append(f.Reads, KV{Key: keysOf(ops, 101)[0], Value: "x", Found: true, Mod: 1})
			return ops
		}},
	}
	for _, c := range cases {
		for seed := int64(1); seed <= 10; seed++ {
			ops := c.mutate(simLease(seed, 60))
			if ops == nil {
				t.Fatalf("%s, seed %d: nothing to mutate", c.name, seed)
			}
			s := checkAs("lease", ops)
			if text := strings.Join(s.details, "\n"); s.anomalies == 0 || !strings.Contains(text, c.want) {
				t.Fatalf("%s, seed %d: not found: %s\n%s", c.name, seed, s.line(), text)
			}
		}
	}
}

func TestUsesLockRPC(t *testing.T) {
	for _, c := range []struct {
		share   float64
		clients int
		want    string
	}{{0.5, 8, "01010101"}, {0, 4, "0000"}, {1, 4, "1111"}, {0.25, 8, "00010001"}} {
		got := ""
		for id := 0; id < c.clients; id++ {
			if usesLockRPC(id, c.share) {
				got += "1"
			} else {
				got += "0"
			}
		}
		if got != c.want {
			t.Errorf("share %v of %d clients: %s, want %s", c.share, c.clients, got, c.want)
		}
	}
}

// A client's moves away from its home and between the others are
// failovers; its way back home is not; watchers never move.
func TestFailoversCounted(t *testing.T) {
	var ops []Op
	for _, ep := range []string{"a", "a", "b", "c", "a", "b", "b"} {
		ops = append(ops, Op{Client: 0, Ep: ep, Type: typeOK, Call: 1, Ret: 2})
	}
	ops = append(ops, Op{Client: 1, Ep: "b", Type: typeOK, Call: 1, Ret: 2},
		Op{Client: 1, Ep: "b", Type: typeOK, Call: 1, Ret: 2},
		Op{Client: -1, Ep: "c", Type: typeOK, Final: true})
	s := summary{}
	s.countOps(ops)
	if s.failovers != 3 {
		t.Fatalf("failovers=%d, want 3", s.failovers)
	}
}

// Only the client's own deadline is a timeout: an answer of the member
// (no leader, a refused connection) is not.
func TestTimedOut(t *testing.T) {
	if !timedOut(context.DeadlineExceeded) || !timedOut(status.Error(codes.DeadlineExceeded, "x")) {
		t.Fatal("a deadline is not a timeout")
	}
	if timedOut(status.Error(codes.Unavailable, "x")) || timedOut(errors.New("x")) {
		t.Fatal("an answer is a timeout")
	}
}
