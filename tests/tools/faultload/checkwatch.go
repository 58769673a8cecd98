package main

import (
	"fmt"
	"sort"
)

// checkWatch checks a watch history against the range's commits: the
// revisions acknowledged puts were given, every event and prev_kv any
// watcher got, and the final Range. Those must agree (one key and value
// per revision), and every value must come from a put that may have
// happened (acknowledged at that very revision, or indeterminate).
// Every committed revision of the range is known this way: one no
// watcher saw is acknowledged, or the next put of its key names it as
// prev_kv, or the final Range shows it.
//
// Then each watcher, over its span (from the revision it first opened
// from to the end marker's revision; to the last event it saw when its
// member no longer answered at the end): each known revision must come
// once (another time is a dup, counted in watch_dups), in increasing
// order, with prev_kv naming the key's previous commit; a known revision
// it never got is a gap (watch_gaps), except those below the compact
// revision of a cancellation for compaction (the watcher was told).
func checkWatch(ops []Op, s *summary, lim checkLimits) {
	t0 := firstCall(ops)
	type commit struct {
		key, value string
		by         *Op
	}
	known := map[int64]commit{}
	learn := func(rev int64, key, value string, by *Op) {
		if c, ok := known[rev]; ok {
			if c.key != key || c.value != value {
				s.anomaly("revision %d is %s=%s to %s but %s=%s to %s", rev, c.key, c.value, describe(c.by, t0), key, value, describe(by, t0))
			}
			return
		}
		known[rev] = commit{key, value, by}
	}
	writes := map[[2]string]*Op{}
	watchers := map[int][]*Op{}
	for i := range ops {
		op := &ops[i]
		switch op.F {
		case "write":
			writes[[2]string{op.Key, op.Value}] = op
			if op.Type == typeOK {
				learn(op.Rev, op.Key, op.Value, op)
			}
		case "watch":
			for _, ev := range op.Events {
				learn(ev.Mod, ev.Key, ev.Value, op)
				if ev.PrevMod != 0 {
					learn(ev.PrevMod, ev.Key, ev.PrevVal, op)
				}
			}
			watchers[op.Client] = append(watchers[op.Client], op)
		case "watch-open", "watch-cancel", "watch-end":
			watchers[op.Client] = append(watchers[op.Client], op)
		case "read":
			if op.Type == typeOK {
				for _, kv := range op.Reads {
					learn(kv.Mod, kv.Key, kv.Value, op)
				}
			}
		default:
			s.anomaly("operation %q is not one of the watch workload's: %s", op.F, describe(op, t0))
		}
	}
	revs := make([]int64, 0, len(known))
	for r := range known {
		revs = append(revs, r)
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i] < revs[j] })
	byKey := map[string][]int64{}
	for _, r := range revs {
		c := known[r]
		byKey[c.key] = append(byKey[c.key], r)
		w := writes[[2]string{c.key, c.value}]
		switch {
		case w == nil:
			s.anomaly("revision %d holds %s=%s, a value never written: %s", r, c.key, c.value, describe(c.by, t0))
		case w.Type == typeFail:
			s.anomaly("revision %d holds %s=%s, whose put failed definitely: %s", r, c.key, c.value, describe(w, t0))
		case w.Type == typeOK && w.Rev != r:
			s.anomaly("revision %d holds %s=%s, acknowledged at revision %d: %s", r, c.key, c.value, w.Rev, describe(c.by, t0))
		}
	}
	// prevOf is the key's commit before rev (0: none)
	prevOf := func(key string, rev int64) int64 {
		rs := byKey[key]
		i := sort.Search(len(rs), func(i int) bool { return rs[i] >= rev })
		if i == 0 {
			return 0
		}
		return rs[i-1]
	}

	for _, id := range perClient(watchers) {
		wops := watchers[id]
		start, last, end := int64(-1), int64(0), int64(-1)
		seen := map[int64]bool{}
		var excused [][2]int64
		for _, op := range wops {
			switch op.F {
			case "watch-open":
				if start < 0 {
					start, last = op.StartRev, op.StartRev-1
				}
			case "watch-cancel":
				if op.CompactRev > last+1 {
					excused = append(excused, [2]int64{last + 1, op.CompactRev - 1})
				}
			case "watch-end":
				end = op.Rev
				if op.Type == typeInfo || op.Rev == 0 {
					end = last
				}
			case "watch":
				for _, ev := range op.Events {
					r := ev.Mod
					if r <= last {
						if seen[r] {
							s.watchDups++
							s.details = append(s.details, fmt.Sprintf("watch dup: watcher %d got revision %d again (%s=%s): %s", id, r, ev.Key, ev.Value, describe(op, t0)))
						} else {
							s.anomaly("watcher %d got revision %d after %d: %s", id, r, last, describe(op, t0))
						}
						continue
					}
					seen[r], last = true, r
					if ev.Type != "put" {
						s.anomaly("watcher %d got a %s event of %s at revision %d; the workload deletes nothing: %s", id, ev.Type, ev.Key, r, describe(op, t0))
					}
					if p := prevOf(ev.Key, r); ev.PrevMod != p || (p != 0 && ev.PrevVal != known[p].value) {
						s.anomaly("watcher %d got %s=%s at revision %d with prev_kv %s@%d; its previous commit is %s@%d: %s",
							id, ev.Key, ev.Value, r, ev.PrevVal, ev.PrevMod, known[p].value, p, describe(op, t0))
					}
				}
			}
		}
		if start < 0 {
			continue
		}
		if end < 0 {
			end = last
		}
		missed := 0
		for _, r := range revs {
			if r < start || r > end || seen[r] {
				continue
			}
			told := false
			for _, e := range excused {
				told = told || (r >= e[0] && r <= e[1])
			}
			if told {
				continue
			}
			s.watchGaps++
			missed++
			if missed <= 10 {
				c := known[r]
				s.details = append(s.details, fmt.Sprintf("watch gap: watcher %d (%s) never got revision %d (%s=%s), within its span %d..%d",
					id, wops[0].Ep, r, c.key, c.value, start, end))
			}
		}
		if missed > 10 {
			s.details = append(s.details, fmt.Sprintf("watch gap: watcher %d missed %d revisions in all", id, missed))
		}
	}
}
