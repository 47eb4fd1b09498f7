package main

// faults is the list mutate plants. Each names the promise it breaks and
// the tests that guard that promise; keep old unique in its file, and
// keep the list in step with the code (mutate reports a fault whose text
// moved as STALE).
var faults = []fault{
	{
		name:  "alo-ack-wait",
		what:  "at-least-once commits input offsets without waiting for the acknowledgements of the writes they depend on",
		file:  "commit.go",
		old:   "\t\tr.err = c.acks.wait(wctx, j.epoch)\n",
		new:   "\t\t_ = wctx\n",
		tests: []tests{{".", "^TestCommitWaitsForAcks$"}},
	},
	{
		name:  "warm-copy-skip",
		what:  "a standby or learner skips the first record of every restore chunk",
		file:  "shell.go",
		old:   "\t\tn, err := st.applyChangelogWith(&s.scratch, recs)\n",
		new:   "\t\tif s.core.Role(id).Role != lifecycle.Active && len(recs) > 1 {\n\t\t\trecs = recs[1:]\n\t\t}\n\t\tn, err := st.applyChangelogWith(&s.scratch, recs)\n",
		tests: []tests{{".", "^TestCrash$"}, {".", "^TestScaleOut$"}},
	},
	{
		name:  "restore-skip-last",
		what:  "a restore moves the checkpoint past the last record of each fetch without applying it (the changelog's last record among them)",
		file:  "task.go",
		old:   "\t\tswitch {\n\t\tcase r.Attrs.IsControl():\n",
		new:   "\t\tswitch {\n\t\tcase r == recs[len(recs)-1]:\n\t\tcase r.Attrs.IsControl():\n",
		tests: []tests{{".", "^TestCrash$"}},
	},
	{
		name:  "drain-leaves-early",
		what:  "a draining instance leaves the group at once, before its tasks are handed over",
		file:  "instance/core.go",
		old:   "\tc.emit(Effect{Kind: Rejoin, Detail: \"leaving\"})\n}\n",
		new:   "\tc.emit(Effect{Kind: Rejoin, Detail: \"leaving\"})\n\tc.leave()\n}\n",
		tests: []tests{{".", "^TestDrain$"}, {"./instance", "^TestScenarios$"}},
	},
	{
		name:  "learner-ready-early",
		what:  "the assignor counts any local copy as caught up, so a learner is promoted however far behind",
		file:  "assign/group.go",
		old:   "\treturn g.lagOf(i, t) <= g.cfg.AcceptableLag\n",
		new:   "\treturn g.lagOf(i, t) != noState\n",
		tests: []tests{{".", "^TestDrain$"}, {"./assign", "."}},
	},
	{
		name:  "assign-revoke-unmoved",
		what:  "the assignor revokes every stateless task it keeps on its owner, handing it back in the follow-up round",
		file:  "assign/smooth.go",
		old:   "\t\tcase o == none:\n\t\t\tp.newOwner[t] = at\n",
		new:   "\t\tcase o == none:\n\t\t\tp.newOwner[t] = at\n\t\tcase at == o && !b.stateful:\n\t\t\tp.revokedBy[t] = o\n",
		tests: []tests{{"./assign", "."}},
	},
	{
		name:  "txn-without-offsets",
		what:  "an exactly-once transaction commits without the input offsets",
		file:  "exactlyonce.go",
		old:   "\tif len(offsets) == 0 {\n\t\treturn nil\n\t}\n\tid, epoch, err := a.group.ProducerID(ctx)\n",
		new:   "\tif len(offsets) >= 0 {\n\t\treturn nil\n\t}\n\tid, epoch, err := a.group.ProducerID(ctx)\n",
		tests: []tests{{".", "^TestExactlyOnceCrash$"}},
	},
	{
		name:  "purge-past-committed",
		what:  "the repartition purge deletes one record past the group's committed offset",
		file:  "purge.go",
		old:   "\t\t\t\tp.pending[topic][part] = eo.Offset\n",
		new:   "\t\t\t\tp.pending[topic][part] = eo.Offset + 1\n",
		tests: []tests{{".", "^TestPurgerOffsets$"}},
	},
	{
		name:  "purger-outlives-run",
		what:  "the repartition purger's goroutine is neither stopped nor awaited when Run ends",
		file:  "purge.go",
		old:   "\tp.cancel()\n\tp.mu.Lock()\n\tstarted := p.started\n\tp.mu.Unlock()\n\tif started {\n",
		new:   "\tp.mu.Lock()\n\tstarted := p.started\n\tp.mu.Unlock()\n\tif false && started {\n",
		tests: []tests{{".", "^TestWordCountTwoInstances$"}},
	},
	{
		name:  "state-drop-deletes",
		what:  "the Pebble store drops the deletes of a batch",
		file:  "state/pebble.go",
		old:   "\t\t\treturn pb.Delete(key, nil)\n",
		new:   "\t\t\treturn nil\n",
		tests: []tests{{"./state", "^TestStoreAgainstModel$"}},
	},
	{
		name:  "state-checkpoint-apart",
		what:  "the Pebble store writes the checkpoint outside the batch of the data it covers",
		file:  "state/pebble.go",
		old:   "\t\terr = pb.Set(checkpointKey, checkpointValue(changelogOffset), nil)\n",
		new:   "\t\terr = s.db.Set(checkpointKey, checkpointValue(changelogOffset), pebble.Sync)\n",
		tests: []tests{{"./state", "^TestCrashKeepsDataAndCheckpointTogether$"}},
	},
	{
		name:  "loop-blocks-on-rebalance",
		what:  "the loop blocks for a second on every rebalance callback (as a final commit or an EndTransaction on the loop can), so tasks that do not move stop too",
		file:  "shell.go",
		old:   "\t\t\ts.step(r.in(s.nextReq))\n",
		new:   "\t\t\ts.step(r.in(s.nextReq))\n\t\t\ttime.Sleep(time.Second)\n",
		tests: []tests{{"./bench", "^TestScaleSmoke$"}},
	},
}
