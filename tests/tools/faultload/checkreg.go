package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"
)

// checkLimits bound the linearizability search: per key, at most
// maxSteps steps, and for the whole check, until deadline. A key whose
// search hits either is reported "unknown", neither clean nor anomalous.
type checkLimits struct {
	maxSteps int64
	deadline time.Time
	text     string // the limits as the flags gave them, for the report
}

// firstCall is the time of the history's first call, where the times
// in reports count from.
func firstCall(ops []Op) int64 {
	t0 := int64(math.MaxInt64)
	for i := range ops {
		if ops[i].Call < t0 {
			t0 = ops[i].Call
		}
	}
	return t0
}

// perClient lists the clients of groups (operations by client) in
// order, after sorting each one's operations by call.
func perClient(groups map[int][]*Op) []int {
	ids := make([]int, 0, len(groups))
	for id, g := range groups {
		ids = append(ids, id)
		sort.SliceStable(g, func(i, j int) bool { return g[i].Call < g[j].Call })
	}
	sort.Ints(ids)
	return ids
}

// describe names an operation in a report: its client, kind, values and
// times relative to t0 (the history's first call), in milliseconds.
func describe(op *Op, t0 int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "proc %d %s %s", op.Proc, op.Type, op.F)
	if op.Key != "" {
		fmt.Fprintf(&b, " key=%s", op.Key)
	}
	if op.Expect != "" {
		fmt.Fprintf(&b, " expect=%s", op.Expect)
	}
	if op.Value != "" {
		fmt.Fprintf(&b, " value=%s", op.Value)
	}
	if op.F == "cas" && op.Type == typeOK {
		fmt.Fprintf(&b, " succeeded=%v", op.Succeeded)
	}
	if reads(op) && op.Key != "" {
		fmt.Fprintf(&b, " read=%s", readText(op))
	}
	if op.Serializable {
		b.WriteString(" serializable")
	}
	kvsText(&b, "reads", op.Reads)
	kvsText(&b, "writes", op.Writes)
	kvsText(&b, "else", op.Else)
	if op.F == "txn" && op.Type == typeOK {
		fmt.Fprintf(&b, " succeeded=%v", op.Succeeded)
	}
	if op.Rev != 0 {
		fmt.Fprintf(&b, " rev=%d", op.Rev)
	}
	if op.LockKey != "" {
		fmt.Fprintf(&b, " lock_key=%s", op.LockKey)
	}
	if op.RPC {
		b.WriteString(" (Lock RPC)")
	}
	if op.Lease != 0 && op.F != "lock" && op.F != "holder-read" && op.F != "unlock" {
		fmt.Fprintf(&b, " lease=%x", op.Lease)
	}
	if op.TTL != 0 && (op.F == "grant" || op.F == "keepalive") {
		fmt.Fprintf(&b, " ttl=%d", op.TTL)
	}
	if op.Gone {
		b.WriteString(" lease not found")
	}
	if op.ValidNs != 0 {
		fmt.Fprintf(&b, " lease alive until %.3f ms", float64(op.ValidNs-t0)/1e6)
	}
	if op.Final {
		b.WriteString(" final")
	}
	ret := "never"
	if op.Type != typeInfo {
		ret = fmt.Sprintf("%.3f", float64(op.Ret-t0)/1e6)
	}
	fmt.Fprintf(&b, " [%.3f..%s ms] ep=%s", float64(op.Call-t0)/1e6, ret, op.Ep)
	if op.Err != "" {
		fmt.Fprintf(&b, " error=%q", op.Err)
	}
	return b.String()
}

// kvsText appends " name=[key=value@mod ...]" for a non-empty list.
func kvsText(b *strings.Builder, name string, kvs []KV) {
	if len(kvs) == 0 {
		return
	}
	fmt.Fprintf(b, " %s=[", name)
	for i, kv := range kvs {
		if i > 0 {
			b.WriteString(" ")
		}
		switch {
		case kv.Found && kv.Mod != 0:
			fmt.Fprintf(b, "%s=%s@%d", kv.Key, kv.Value, kv.Mod)
		case kv.Found:
			fmt.Fprintf(b, "%s=%s", kv.Key, kv.Value)
		default:
			fmt.Fprintf(b, "%s:absent", kv.Key)
		}
	}
	b.WriteString("]")
}

// stateText names a register state of regModel.
func stateText(s string) string {
	switch s {
	case "":
		return "<absent>"
	case "?":
		return "a value no operation reads"
	}
	return s
}

func readText(op *Op) string {
	if !op.Found {
		return "<absent>"
	}
	return op.Read
}

// readValue is the register state a read saw: the value, or "" when the
// key was absent (written values are never empty).
func readValue(op *Op) string {
	if !op.Found {
		return ""
	}
	return op.Read
}

// writes reports whether op may have written its value: an ok or
// indeterminate write, a cas that applied or may have.
func writes(op *Op) bool {
	switch op.F {
	case "write":
		return op.Type != typeFail
	case "cas":
		return op.Type == typeInfo || (op.Type == typeOK && op.Succeeded)
	}
	return false
}

// acked reports whether op is an acknowledged write.
func acked(op *Op) bool {
	return op.Type == typeOK && (op.F == "write" || (op.F == "cas" && op.Succeeded))
}

// reads reports whether op read the register: an ok read, or an ok cas
// that did not apply (its else branch read the current value).
func reads(op *Op) bool {
	return op.Type == typeOK && (op.F == "read" || (op.F == "cas" && !op.Succeeded))
}

// regModel is a register per key: the state is its value, "" when
// absent. Values no operation in the search can tell apart (nobody reads
// or expects them) are all "?", so the memo sees their states as one.
type regModel struct {
	steps []regStep
}

type regStep struct {
	kind   byte // r read, w write, c cas that applied or may have, f cas that did not apply
	in     string
	expect string
	out    string
}

func (m *regModel) step(s string, i int) (string, bool) {
	st := &m.steps[i]
	switch st.kind {
	case 'r':
		return s, s == st.out
	case 'w':
		return st.in, true
	case 'c':
		return st.in, s == st.expect
	default:
		return s, s == st.out && s != st.expect
	}
}

// checkRegister checks a register history: every value read was written
// by an operation that could have (called before the read returned, not
// a definite failure); the linearizable operations of each key are
// linearizable (keys are independent registers, so each is checked on
// its own); and no acknowledged write is lost.
//
// What the search is given, per key: ok linearizable reads, ok writes,
// ok cas (one that did not apply is a read of the value its else branch
// saw, which must differ from the expected one), and the indeterminate
// writes and cas whose value is needed (see regSearch). Definite
// failures did not happen, and an indeterminate read says nothing.
// Serializable reads promise only a committed value, so they are
// checked by the first rule only.
//
// lost counts acknowledged writes w of a key whose final read (the last
// ok read made after the run, with retries) shows neither w's value nor
// one that can be linearized after w: its value differs, and no other
// write that may have taken effect (ok, or indeterminate) returned after
// w was called. Each such write is also a linearizability violation of
// its key; lost names the writes themselves.
func checkRegister(ops []Op, s *summary, lim checkLimits) {
	t0 := firstCall(ops)
	byKey := map[string][]*Op{}
	var keys []string
	for i := range ops {
		op := &ops[i]
		switch op.F {
		case "read", "write", "cas":
		default:
			s.anomaly("operation %q is not one of the register workload's: %s", op.F, describe(op, t0))
			continue
		}
		if byKey[op.Key] == nil {
			keys = append(keys, op.Key)
		}
		byKey[op.Key] = append(byKey[op.Key], op)
	}
	sort.Strings(keys)

	type keyResult struct {
		res  linResult
		ops  []*Op
		took time.Duration
	}
	results := make([]keyResult, len(keys))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for ki, k := range keys {
		kops := byKey[k]
		checkValues(kops, s, t0)
		checkLost(kops, s, t0)
		search, lops, m := regSearch(kops)
		wg.Add(1)
		go func(ki int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			results[ki] = keyResult{linearizable(lops, m, lim.maxSteps, lim.deadline), search, time.Since(start)}
		}(ki)
	}
	wg.Wait()
	for ki, k := range keys {
		r := &results[ki]
		logf("key %s: %d operations searched, %d steps, %.2f s", k, len(r.ops), r.res.steps, r.took.Seconds())
		switch r.res.verdict {
		case linUnknown:
			s.unknown++
			s.details = append(s.details, fmt.Sprintf("unknown: key %s: the linearizability search of %d operations gave up after %d steps, %.1f s (limits: %s)",
				k, len(r.ops), r.res.steps, r.took.Seconds(), lim.text))
		case linBad:
			var b strings.Builder
			fmt.Fprintf(&b, "key %s is not linearizable (%d operations searched, %d steps): at most %d linearized, the register then holding %s; this operation returned but cannot be placed:\n    %s",
				k, len(r.ops), r.res.steps, r.res.best, stateText(r.res.bestState), describe(r.ops[r.res.blocker], t0))
			if len(r.res.lastLin) > 0 {
				b.WriteString("\n  the last operations linearized before it, latest first:")
				for _, i := range r.res.lastLin {
					b.WriteString("\n    " + describe(r.ops[i], t0))
				}
			}
			s.anomaly("%s", b.String())
		}
	}
}

// checkValues reports reads of values no operation could have written.
func checkValues(kops []*Op, s *summary, t0 int64) {
	writers := map[string]*Op{}
	for _, op := range kops {
		if op.F == "write" || op.F == "cas" {
			if w, dup := writers[op.Value]; dup && op.Value != "" {
				s.anomaly("value %s written twice (the workload writes each value once): %s and %s",
					op.Value, describe(w, t0), describe(op, t0))
			}
			writers[op.Value] = op
		}
	}
	for _, op := range kops {
		if !reads(op) || !op.Found {
			continue
		}
		w := writers[op.Read]
		switch {
		case w == nil:
			s.anomaly("read of a value never written: %s", describe(op, t0))
		case !writes(w) && w.Type == typeFail:
			s.anomaly("read of a value whose write failed definitely: %s; the write: %s", describe(op, t0), describe(w, t0))
		case !writes(w):
			s.anomaly("read of a value whose cas did not apply: %s; the cas: %s", describe(op, t0), describe(w, t0))
		case w.Call > op.Ret:
			s.anomaly("read of a value before its write was called: %s; the write: %s", describe(op, t0), describe(w, t0))
		}
	}
}

// checkLost counts the acknowledged writes the final read shows lost
// (see checkRegister).
func checkLost(kops []*Op, s *summary, t0 int64) {
	var final *Op
	for _, op := range kops {
		if op.Final && op.Type == typeOK && (final == nil || op.Ret > final.Ret) {
			final = op
		}
	}
	if final == nil {
		if len(kops) > 0 {
			s.details = append(s.details, fmt.Sprintf("note: key %s has no ok final read; its lost writes are not counted", kops[0].Key))
		}
		return
	}
	fv := readValue(final)
	// the two latest returns of the writes that may have happened before
	// the final read (an indeterminate one never returns), so that each
	// write can ask about the latest of the others
	var top *Op
	topRet, nextRet := int64(math.MinInt64), int64(math.MinInt64)
	for _, o := range kops {
		if !writes(o) || o.Call >= final.Ret {
			continue
		}
		r := o.Ret
		if o.Type == typeInfo {
			r = math.MaxInt64
		}
		if r > topRet {
			top, topRet, nextRet = o, r, topRet
		} else if r > nextRet {
			nextRet = r
		}
	}
	for _, w := range kops {
		if !acked(w) || w.Value == fv {
			continue
		}
		later := topRet
		if top == w {
			later = nextRet
		}
		if later <= w.Call {
			s.lost++
			s.details = append(s.details, fmt.Sprintf("lost: %s; no later write, and the final read shows %s: %s",
				describe(w, t0), readText(final), describe(final, t0)))
		}
	}
}

// regSearch picks the operations of one key that the linearizability
// search needs (see checkRegister), sorted by call, with their calls and
// returns for the search, and their model.
//
// A value is needed when an ok operation of the search can only be
// linearized in a state holding it (an ok read or a cas that did not
// apply saw it, an ok cas that applied expected it), or when an
// indeterminate cas whose value is needed expected it. An indeterminate
// write or cas of a value not needed is left out: once it takes effect
// no operation that must be linearized can follow until an ok write
// resets the register (the states it leads to are needed by no one), so
// leaving it out changes no verdict, and the search does not carry
// operations that may take effect at any point but need not.
func regSearch(kops []*Op) ([]*Op, []linOp, *regModel) {
	needed := map[string]bool{}
	for _, op := range kops {
		switch {
		case op.Type != typeOK || op.Serializable:
		case reads(op) && op.Found:
			needed[op.Read] = true
		case op.F == "cas" && op.Succeeded:
			needed[op.Expect] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for _, op := range kops {
			if op.F == "cas" && op.Type == typeInfo && needed[op.Value] && !needed[op.Expect] {
				needed[op.Expect], changed = true, true
			}
		}
	}
	var search []*Op
	for _, op := range kops {
		switch {
		case op.Type == typeFail:
		case op.F == "read" && (op.Type == typeInfo || op.Serializable):
		case op.Type == typeInfo && !needed[op.Value]:
		default:
			search = append(search, op)
		}
	}
	sort.SliceStable(search, func(i, j int) bool { return search[i].Call < search[j].Call })
	m := &regModel{steps: make([]regStep, len(search))}
	canon := func(v string) string {
		if needed[v] {
			return v
		}
		return "?"
	}
	lops := make([]linOp, len(search))
	for i, op := range search {
		st := &m.steps[i]
		switch {
		case op.F == "read":
			st.kind, st.out = 'r', readValue(op)
		case op.F == "write":
			st.kind, st.in = 'w', canon(op.Value)
		case op.Type == typeOK && !op.Succeeded:
			st.kind, st.out, st.expect = 'f', readValue(op), op.Expect
		default:
			st.kind, st.in, st.expect = 'c', canon(op.Value), op.Expect
		}
		lops[i] = linOp{call: op.Call, ret: op.Ret}
		if op.Type == typeInfo {
			lops[i].ret = math.MaxInt64
		}
	}
	return search, lops, m
}
