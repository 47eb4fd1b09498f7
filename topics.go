package baton

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Internal topics. Changelogs are compacted; repartition topics keep their
// records forever (retention.ms=-1, retention.bytes=-1) and baton deletes
// what the group has committed (see internal/purge), so a slow consumer never
// loses records to retention. Both get the replication factor and
// min.insync.replicas of WithReplicationFactor and WithMinInSyncReplicas.

// replication returns the replication factor and min.insync.replicas of
// the topics baton creates, given the number of brokers the cluster
// reports.
func (c *config) replication(brokers int) (rf, isr int, err error) {
	rf = c.replicationFactor
	if !c.replicationSet {
		rf = max(1, min(3, brokers))
	}
	isr = c.minISR
	if !c.minISRSet {
		isr = max(1, min(2, rf-1))
	}
	if isr > rf {
		return 0, 0, fmt.Errorf("%w: min in-sync replicas: %d exceeds the replication factor %d (the default on a cluster of %d brokers); set the replication factor too", ErrConfig, isr, rf, brokers)
	}
	return rf, isr, nil
}

// internalTopicConfigs are the configs of changelog and repartition topics
// baton creates.
func changelogConfigs(isr int) map[string]*string {
	return map[string]*string{
		"cleanup.policy":      kadm.StringPtr("compact"),
		"min.insync.replicas": kadm.StringPtr(strconv.Itoa(isr)),
	}
}

func repartitionConfigs(isr int) map[string]*string {
	return map[string]*string{
		"cleanup.policy":      kadm.StringPtr("delete"),
		"retention.ms":        kadm.StringPtr("-1"),
		"retention.bytes":     kadm.StringPtr("-1"),
		"min.insync.replicas": kadm.StringPtr(strconv.Itoa(isr)),
	}
}

// sinkConfigs are the configs of an output topic baton creates
// (WithCreateSinks): the caller's, with min.insync.replicas added unless
// the caller set it.
func sinkConfigs(user map[string]*string, isr int) map[string]*string {
	out := map[string]*string{"min.insync.replicas": kadm.StringPtr(strconv.Itoa(isr))}
	for k, v := range user {
		out[k] = v
	}
	return out
}

// prepareTopics waits for the brokers (10 s), learns partition counts and
// creates internal topics that are missing: repartition topics with the
// partitions of the subtopology that writes them, changelogs with the
// partitions of their subtopology's sources. Internal topics that exist
// already must have those partition counts and a cleanup policy baton can
// work with (changelogs compacted, repartition topics delete); otherwise it
// returns an error naming the topic.
func (a *App) prepareTopics(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var meta kadm.Metadata
	var err, last error
	for {
		meta, err = a.admin.Metadata(cctx)
		if err == nil {
			break
		}
		// Wrong credentials do not get better by waiting.
		if errors.Is(err, kerr.SaslAuthenticationFailed) {
			return fmt.Errorf("%w: %s: %w", ErrAuth, joinComma(a.cfg.brokers), err)
		}
		// The attempt the deadline cut short says less than the one before.
		if last == nil || cctx.Err() == nil {
			last = err
		}
		select {
		case <-cctx.Done():
			return fmt.Errorf("%w: %s: %v", ErrBrokers, joinComma(a.cfg.brokers), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
	details := meta.Topics
	rf, isr, err := a.cfg.replication(len(meta.Brokers))
	if err != nil {
		return err
	}
	internal := map[string]bool{}
	for _, s := range a.top.Subtopologies() {
		for _, t := range s.Repartition {
			internal[t] = true
		}
		for _, st := range s.Stores {
			if !st.Source { // a table's topic is the user's
				internal[st.Changelog] = true
			}
		}
	}
	// A replication factor the cluster cannot give is reported now, not
	// after waiting for the input topics, if an internal topic is missing.
	if rf > len(meta.Brokers) {
		for t := range internal {
			if d, ok := details[t]; !ok || d.Err != nil {
				return fmt.Errorf("%w: replication factor: %d exceeds the %d brokers of the cluster; topic %s cannot be created", ErrConfig, rf, len(meta.Brokers), t)
			}
		}
	}
	// Input topics must exist before their partition counts size the
	// internal topics: wait for them (a producer may create them).
	for _, t := range a.sourceTopics() {
		if internal[t] {
			continue
		}
		logged := false
		for {
			if d, ok := details[t]; ok && d.Err == nil && len(d.Partitions) > 0 {
				break
			}
			if !logged {
				a.log.Info("waiting for input topic to exist", "topic", t)
				logged = true
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
			lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
			more, err := a.admin.ListTopics(lctx, t)
			lcancel()
			if err == nil {
				for k, v := range more {
					details[k] = v
				}
			}
		}
	}
	// Waiting for the input may have taken longer than the brokers' 10 s:
	// creating and checking the internal topics gets its own time.
	cctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	parts := func(t string) int32 {
		if d, ok := details[t]; ok && d.Err == nil {
			return int32(len(d.Partitions))
		}
		return 0
	}
	// create creates topic and reports whether it did: false if it exists
	// already though the metadata did not list it yet (just created by
	// someone else, or not yet known to the broker that answered).
	create := func(topic string, n int32, configs map[string]*string) (bool, error) {
		if rf > len(meta.Brokers) {
			return false, fmt.Errorf("%w: replication factor: %d exceeds the %d brokers of the cluster; topic %s cannot be created", ErrConfig, rf, len(meta.Brokers), topic)
		}
		resp, err := a.admin.CreateTopic(cctx, n, int16(rf), configs, topic)
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("baton: creating topic %s (%d partitions, replication factor %d): %w", topic, n, rf, err)
		}
		a.log.Info("created topic", "topic", topic, "partitions", n, "replication_factor", rf, "min_insync_replicas", isr)
		details[topic] = kadm.TopicDetail{Topic: topic, Partitions: make(kadm.PartitionDetails, n)}
		for p := range n {
			details[topic].Partitions[p] = kadm.PartitionDetail{Topic: topic, Partition: p}
		}
		return true, nil
	}
	// existing internal topics whose cleanup policy is checked below:
	// topic -> "changelog" or "repartition".
	existing := map[string]string{}
	internalTopic := func(kind, topic string, n int32, configs map[string]*string) error {
		if n <= 0 {
			return nil
		}
		have := parts(topic)
		if have == 0 {
			created, err := create(topic, n, configs)
			if err != nil || created {
				return err
			}
			d, err := a.waitTopic(ctx, topic)
			if err != nil {
				return err
			}
			details[topic] = d
			have = int32(len(d.Partitions))
		}
		if have != n {
			return fmt.Errorf("baton: %s topic %s has %d partitions, the subtopology has %d tasks: delete it or use a new app id", kind, topic, have, n)
		}
		existing[topic] = kind
		return nil
	}
	// Subtopologies in id order: a repartition topic is written by an
	// earlier subtopology than the one reading it.
	for _, s := range a.top.Subtopologies() {
		n := int32(0)
		counts := map[string]int32{}
		for _, src := range s.Sources {
			if p := parts(src); p > 0 {
				counts[src] = p
				if n == 0 || p < n {
					n = p
				}
			}
		}
		if len(counts) == len(s.Sources) {
			if _, err := s.CheckPartitions(counts); err != nil {
				return fmt.Errorf("baton: %w: a subtopology's topics are joined or share its stores, so each needs the same number of partitions", err)
			}
		}
		if n == 0 {
			a.log.Warn("input topic missing or empty; the subtopology waits for it", "subtopology", s.ID, "topics", s.Sources)
		}
		for _, st := range s.Stores {
			if st.Source {
				continue
			}
			if err := internalTopic("changelog", st.Changelog, n, changelogConfigs(isr)); err != nil {
				return err
			}
		}
		for _, sink := range s.Sinks {
			var err error
			switch {
			case slices.Contains(s.Repartition, sink):
				err = internalTopic("repartition", sink, n, repartitionConfigs(isr))
			case a.cfg.sinkConfigs != nil && parts(sink) == 0 && n > 0:
				_, err = create(sink, n, sinkConfigs(a.cfg.sinkConfigs, isr))
			}
			if err != nil {
				return err
			}
		}
	}
	if err := a.checkPolicies(cctx, existing); err != nil {
		return err
	}
	a.partsMu.Lock()
	for t, d := range details {
		a.topicParts[t] = int32(len(d.Partitions))
	}
	a.partsMu.Unlock()
	return nil
}

// waitTopic returns the metadata of a topic that exists, waiting (10 s)
// until the brokers list it.
func (a *App) waitTopic(ctx context.Context, topic string) (kadm.TopicDetail, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		ds, err := a.admin.ListTopics(ctx, topic)
		if d, ok := ds[topic]; err == nil && ok && d.Err == nil && len(d.Partitions) > 0 {
			return d, nil
		}
		if err == nil {
			err = ds[topic].Err
		}
		select {
		case <-ctx.Done():
			return kadm.TopicDetail{}, fmt.Errorf("baton: topic %s exists but its metadata is not available: %v", topic, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkPolicies checks the cleanup policy of internal topics that existed
// before this start: a changelog must be compacted (a deleting changelog
// loses state), a repartition topic must not be (compaction drops records
// not yet processed).
func (a *App) checkPolicies(ctx context.Context, existing map[string]string) error {
	if len(existing) == 0 {
		return nil
	}
	topics := make([]string, 0, len(existing))
	for t := range existing {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	// A broker that has not heard of a topic just created yet answers
	// UnknownTopicOrPartition: ask again for a while.
	var rcs kadm.ResourceConfigs
	var err error
	for {
		rcs, err = a.admin.DescribeTopicConfigs(ctx, topics...)
		unknown := false
		for _, rc := range rcs {
			unknown = unknown || errors.Is(rc.Err, kerr.UnknownTopicOrPartition)
		}
		if err != nil || !unknown {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
			continue
		}
		break
	}
	if err != nil {
		return fmt.Errorf("baton: describing the configs of topics %s: %w", strings.Join(topics, ","), err)
	}
	for _, rc := range rcs {
		kind, ok := existing[rc.Name]
		if !ok {
			continue
		}
		if rc.Err != nil {
			return fmt.Errorf("baton: describing the configs of %s topic %s: %w", kind, rc.Name, rc.Err)
		}
		policy := "delete" // Kafka's default
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.Value != nil {
				policy = *c.Value
			}
		}
		var set []string
		for _, p := range strings.Split(policy, ",") {
			if p = strings.TrimSpace(p); p != "" {
				set = append(set, p)
			}
		}
		switch {
		case kind == "changelog" && !slices.Contains(set, "compact"):
			return fmt.Errorf("baton: changelog topic %s has cleanup.policy=%s, want compact: state would be lost to retention; set cleanup.policy=compact or use a new app id", rc.Name, policy)
		case kind == "repartition" && !slices.Equal(set, []string{"delete"}):
			return fmt.Errorf("baton: repartition topic %s has cleanup.policy=%s, want delete: compaction drops records not yet processed; set cleanup.policy=delete or use a new app id", rc.Name, policy)
		}
	}
	return nil
}
