package topology

import "strings"

// WordCount returns baton's wordcount application (see the run spec):
// subtopology 0 reads input, whose values are lines of UTF-8 text, splits
// each with strings.Fields and writes every word, keyed by itself, to
// RepartitionTopic(appID, "words"); subtopology 1 counts the words of its
// partition in store "counts" and, for every occurrence, sends key=word,
// value=count as decimal ASCII to output. Input keys are ignored.
func WordCount(appID, input, output string) (*Topology, error) {
	b := NewBuilder(appID)
	lines := FromTopic(b, input, Bytes, String)
	words := FlatMapValues(lines, strings.Fields)
	byWord := GroupBy(words, func(_ []byte, word string) string { return word }, String, "words")
	Count(byWord, "counts").ToStream().To(output)
	return b.Build()
}
