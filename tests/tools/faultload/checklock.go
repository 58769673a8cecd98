package main

import (
	"fmt"
	"sort"
)

// checkLock checks a lock history. Each client's hold runs from the
// return of its ok lock to the call of its unlock, or to the end of the
// part during which its lease was surely alive (the unlock's valid_ns)
// if that comes first; a lock with no unlock after it claims nothing.
// No two holds of different clients may overlap (each overlapping pair
// counts in double_holders). Within its hold a holder's read of its own
// lock key must find it, and a marker read must show a lock key some
// holder wrote.
func checkLock(ops []Op, s *summary, lim checkLimits) {
	t0 := firstCall(ops)
	byClient := map[int][]*Op{}
	markers := map[string]bool{}
	for i := range ops {
		op := &ops[i]
		switch op.F {
		case "grant", "lock", "marker-write", "holder-read", "marker-read", "unlock":
			byClient[op.Client] = append(byClient[op.Client], op)
		default:
			s.anomaly("operation %q is not one of the lock workload's: %s", op.F, describe(op, t0))
			continue
		}
		if op.F == "marker-write" && op.Type != typeFail {
			markers[op.Value] = true
		}
	}
	type hold struct {
		lock, unlock *Op
		start, end   int64
		inside       []*Op
	}
	var holds []*hold
	for _, id := range perClient(byClient) {
		var cur *hold
		for _, op := range byClient[id] {
			switch op.F {
			case "lock":
				cur = nil
				if op.Type == typeOK {
					cur = &hold{lock: op, start: op.Ret}
				}
			case "unlock":
				if cur != nil {
					cur.unlock, cur.end = op, op.Call
					if op.ValidNs < cur.end {
						cur.end = op.ValidNs
					}
					holds = append(holds, cur)
				}
				cur = nil
			default:
				if cur != nil {
					cur.inside = append(cur.inside, op)
				}
			}
		}
	}
	for _, h := range holds {
		for _, o := range h.inside {
			switch {
			case o.Type != typeOK:
			case o.F == "holder-read" && !o.Found && o.Ret <= h.end:
				s.anomaly("a holder's lock key was gone while its lease lived: %s; the hold: %s", describe(o, t0), describe(h.lock, t0))
			case o.F == "marker-read" && o.Found && !markers[o.Read]:
				s.anomaly("a marker read shows %s, which no holder wrote: %s", o.Read, describe(o, t0))
			}
		}
	}
	sort.Slice(holds, func(i, j int) bool { return holds[i].start < holds[j].start })
	for i, a := range holds {
		if a.end <= a.start {
			continue
		}
		for _, b := range holds[i+1:] {
			if b.start >= a.end {
				break
			}
			if b.end <= b.start || b.lock.Client == a.lock.Client {
				continue
			}
			s.doubleHolders++
			s.details = append(s.details, fmt.Sprintf("double holders: %s held from %.3f to %.3f ms and %s from %.3f to %.3f ms:\n    %s\n    %s\n    %s\n    %s",
				a.lock.LockKey, float64(a.start-t0)/1e6, float64(a.end-t0)/1e6,
				b.lock.LockKey, float64(b.start-t0)/1e6, float64(b.end-t0)/1e6,
				describe(a.lock, t0), describe(a.unlock, t0), describe(b.lock, t0), describe(b.unlock, t0)))
		}
	}
}
