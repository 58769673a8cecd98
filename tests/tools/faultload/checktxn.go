package main

import (
	"fmt"
	"math"
	"sort"
)

// checkTxn checks a txn history for strict serializability, through the
// revisions the server gave: committed txns are ordered by revision, and
// that order must explain every value read and agree with real time.
//
// A txn that committed (ok, succeeded) did so at its header revision. An
// indeterminate txn committed at revision m if anyone read one of its
// values with mod revision m, and is otherwise left out (had it
// committed unseen, a later read would have seen it). Each observation -
// a read's snapshot at its header revision R, a committed txn's compared
// values at its revision - 1, an aborted txn's else reads at its header
// revision - must show for each key the value of the last known commit
// to that key at or before R, with that commit's revision as mod
// revision (absent when there is none), and its value must come from a
// txn that committed. Then, in real time, an operation called after
// another returned has a revision at least as high, higher if it is a
// committed txn (a new revision). Two txns committed at one revision,
// or one indeterminate txn read at two, are anomalies too.
//
// Acknowledged txns lost are counted in lost (see checkTxnLost).
func checkTxn(ops []Op, s *summary, lim checkLimits) {
	t0 := firstCall(ops)
	type kv struct{ key, value string }
	writer := map[kv]*Op{}
	rev := map[*Op]int64{}
	var seen []txnObs
	for i := range ops {
		op := &ops[i]
		switch {
		case op.F == "txn":
			for _, w := range op.Writes {
				writer[kv{w.Key, w.Value}] = op
			}
			switch {
			case op.Type == typeOK && op.Succeeded:
				rev[op] = op.Rev
				seen = append(seen, txnObs{op, op.Reads, op.Rev - 1})
			case op.Type == typeOK:
				seen = append(seen, txnObs{op, op.Else, op.Rev})
			}
		case op.F == "read":
			if op.Type == typeOK {
				seen = append(seen, txnObs{op, op.Reads, op.Rev})
			}
		default:
			s.anomaly("operation %q is not one of the txn workload's: %s", op.F, describe(op, t0))
		}
	}
	// indeterminate txns seen committed
	for _, o := range seen {
		for _, r := range o.kvs {
			w := writer[kv{r.Key, r.Value}]
			if !r.Found || w == nil || w.Type != typeInfo {
				continue
			}
			if at, ok := rev[w]; ok && at != r.Mod {
				s.anomaly("an indeterminate txn seen committed at two revisions, %d and %d: %s; read by %s",
					at, r.Mod, describe(w, t0), describe(o.op, t0))
				continue
			}
			rev[w] = r.Mod
		}
	}
	// the known commits of each key, by revision
	type commit struct {
		rev int64
		op  *Op
	}
	byKey := map[string][]commit{}
	byRev := map[int64]*Op{}
	for op, r := range rev {
		if other := byRev[r]; other != nil && other != op {
			s.anomaly("two txns committed at revision %d: %s and %s", r, describe(other, t0), describe(op, t0))
		}
		byRev[r] = op
		for _, w := range op.Writes {
			byKey[w.Key] = append(byKey[w.Key], commit{r, op})
		}
	}
	for _, cs := range byKey {
		sort.Slice(cs, func(i, j int) bool { return cs[i].rev < cs[j].rev })
	}
	lastAt := func(key string, at int64) *commit {
		cs := byKey[key]
		i := sort.Search(len(cs), func(i int) bool { return cs[i].rev > at })
		if i == 0 {
			return nil
		}
		return &cs[i-1]
	}
	for _, o := range seen {
		for _, r := range o.kvs {
			if r.Found {
				w := writer[kv{r.Key, r.Value}]
				switch {
				case w == nil:
					s.anomaly("read of a value never written: %s=%s (mod %d) at revision %d by %s", r.Key, r.Value, r.Mod, o.at, describe(o.op, t0))
					continue
				case w.Type == typeFail:
					s.anomaly("read of a value whose txn failed definitely: %s=%s by %s; the txn: %s", r.Key, r.Value, describe(o.op, t0), describe(w, t0))
					continue
				case w.Type == typeOK && !w.Succeeded:
					s.anomaly("read of a value whose txn did not apply: %s=%s by %s; the txn: %s", r.Key, r.Value, describe(o.op, t0), describe(w, t0))
					continue
				case rev[w] != r.Mod:
					s.anomaly("read of %s=%s with mod revision %d, but its txn committed at %d: %s; the txn: %s", r.Key, r.Value, r.Mod, rev[w], describe(o.op, t0), describe(w, t0))
					continue
				case r.Mod > o.at:
					s.anomaly("read of %s=%s with mod revision %d after the revision %d it was read at: %s", r.Key, r.Value, r.Mod, o.at, describe(o.op, t0))
					continue
				}
			}
			c := lastAt(r.Key, o.at)
			switch {
			case c == nil && !r.Found:
			case c == nil:
				s.anomaly("read of %s=%s (mod %d) at revision %d, before any commit of it: %s", r.Key, r.Value, r.Mod, o.at, describe(o.op, t0))
			case !r.Found:
				s.anomaly("read of %s absent at revision %d, after its commit at %d: %s; the commit: %s", r.Key, o.at, c.rev, describe(o.op, t0), describe(c.op, t0))
			case c.rev != r.Mod:
				s.anomaly("stale read of %s at revision %d: mod %d, but it was committed again at %d: %s; that commit: %s", r.Key, o.at, r.Mod, c.rev, describe(o.op, t0), describe(c.op, t0))
			}
		}
	}
	checkRealTime(ops, rev, s, t0)
	checkTxnLost(ops, seen, rev, s, t0)
}

// txnObs is one observation of keys at a revision: a read's snapshot at
// its header revision, a committed txn's compared values at its
// revision - 1, an aborted txn's else reads at its header revision.
type txnObs struct {
	op  *Op
	kvs []KV
	at  int64
}

// checkTxnLost counts the acknowledged txns (ok, succeeded) that are
// lost: for one of its keys, the latest observation, at or above its
// revision, shows an older mod revision (or none) while no later known
// commit wrote the key, so neither the txn's value nor a later commit's
// is there (the workload never deletes) - the final snapshot read after
// the run catches those; or no observation ever showed the txn's value
// while one at or above its revision shows an older one - a txn a later
// one overwrote without ever seeing it. An indeterminate txn never counts
// (it may not have applied), though a read seeing its value makes it a
// commit for the checks above. Each lost txn counts once, however many
// of its keys are missing; each is a stale read of those checks too.
func checkTxnLost(ops []Op, seen []txnObs, rev map[*Op]int64, s *summary, t0 int64) {
	final := false
	// per key, its observations by revision, and from each the lowest
	// mod revision (0: absent) seen at that revision or above
	type view struct {
		at, mod int64
		op      *Op
	}
	views := map[string][]view{}
	type kmod struct {
		key string
		mod int64
	}
	shown := map[kmod]bool{}
	for _, o := range seen {
		final = final || o.op.Final
		for _, r := range o.kvs {
			views[r.Key] = append(views[r.Key], view{o.at, r.Mod, o.op})
			shown[kmod{r.Key, r.Mod}] = true
		}
	}
	if !final {
		s.details = append(s.details, "note: no ok final read; a lost txn no later one overwrote is not counted")
	}
	// the latest known commit of each key
	latest := map[string]int64{}
	for op, r := range rev {
		for _, w := range op.Writes {
			if r > latest[w.Key] {
				latest[w.Key] = r
			}
		}
	}
	low := map[string][]view{}
	for k, vs := range views {
		sort.SliceStable(vs, func(i, j int) bool { return vs[i].at < vs[j].at })
		m := make([]view, len(vs))
		for i := len(vs) - 1; i >= 0; i-- {
			m[i] = vs[i]
			if i+1 < len(vs) && m[i+1].mod < m[i].mod {
				m[i] = m[i+1]
			}
		}
		views[k], low[k] = vs, m
	}
	for i := range ops {
		op := &ops[i]
		if op.F != "txn" || op.Type != typeOK || !op.Succeeded {
			continue
		}
		for _, w := range op.Writes {
			vs := views[w.Key]
			if len(vs) == 0 {
				continue
			}
			v, why := vs[len(vs)-1], "the latest observation of"
			if v.at < op.Rev || v.mod >= op.Rev || latest[w.Key] > op.Rev {
				j := sort.Search(len(vs), func(j int) bool { return vs[j].at >= op.Rev })
				if j == len(vs) || shown[kmod{w.Key, op.Rev}] || low[w.Key][j].mod >= op.Rev {
					continue
				}
				v, why = low[w.Key][j], "never seen, and"
			}
			s.lost++
			s.details = append(s.details, fmt.Sprintf("lost: %s; %s %s, at revision %d, has mod revision %d: %s",
				describe(op, t0), why, w.Key, v.at, v.mod, describe(v.op, t0)))
			break
		}
	}
}

// checkRealTime checks that revisions agree with real time: an ok read
// or aborted txn has a revision at least as high as every operation
// that returned before it was called; a committed txn (ok, or
// indeterminate with a revision it was seen at) a higher one.
func checkRealTime(ops []Op, rev map[*Op]int64, s *summary, t0 int64) {
	type item struct {
		op    *Op
		rev   int64
		write bool
		ret   int64
	}
	var items []item
	for i := range ops {
		op := &ops[i]
		if r, ok := rev[op]; ok {
			ret := op.Ret
			if op.Type == typeInfo {
				ret = math.MaxInt64
			}
			items = append(items, item{op, r, true, ret})
		} else if op.Type == typeOK {
			items = append(items, item{op, op.Rev, false, op.Ret})
		}
	}
	byCall := append([]item(nil), items...)
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].op.Call < byCall[j].op.Call })
	byRet := items
	sort.Slice(byRet, func(i, j int) bool { return byRet[i].ret < byRet[j].ret })
	var max *item
	j := 0
	for i := range byCall {
		b := &byCall[i]
		for ; j < len(byRet) && byRet[j].ret < b.op.Call; j++ {
			if max == nil || byRet[j].rev > max.rev {
				max = &byRet[j]
			}
		}
		if max == nil {
			continue
		}
		if b.rev < max.rev || (b.write && b.rev == max.rev) {
			s.anomaly("revision %d of an operation called after one of revision %d returned: %s; the earlier one: %s",
				b.rev, max.rev, describe(b.op, t0), describe(max.op, t0))
		}
	}
}
