#!/usr/bin/env bash
# build.sh OUTDIR: builds the Kafka Streams peer with Maven and leaves the
# launcher OUTDIR/kstreams (with its jars in OUTDIR/kstreams-lib). Prints
# nothing on stdout; Maven's complaints go to stderr. A second run with no
# change to pom.xml or src/ does not start Maven.
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
	echo "usage: build.sh OUTDIR" >&2
	exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
jar=$here/target/kstreams-peer.jar

stale() {
	[ ! -f "$jar" ] || [ ! -f "$here/target/lib/.complete" ] ||
		[ -n "$(find "$here/pom.xml" "$here/src" -newer "$jar" -print -quit)" ]
}

if stale; then
	rm -f "$here/target/lib/.complete"
	# Maven reports errors on its stdout: send all of it to stderr.
	if ! (cd "$here" && mvn -q -B -Dstyle.color=never package -DskipTests) 1>&2; then
		echo "build.sh: mvn package failed in $here" >&2
		exit 1
	fi
	touch "$here/target/lib/.complete"
fi

lib=$out/kstreams-lib
if [ ! -f "$lib/kstreams-peer.jar" ] || [ "$jar" -nt "$lib/kstreams-peer.jar" ]; then
	rm -rf "$lib.tmp"
	mkdir -p "$lib.tmp"
	cp -p "$here"/target/lib/*.jar "$jar" "$lib.tmp/"
	rm -rf "$lib"
	mv "$lib.tmp" "$lib"
fi

launcher=$out/kstreams
cat >"$launcher.tmp" <<'LAUNCHER'
#!/bin/sh
# Kafka Streams peer of baton bench versus; built by compare/kstreams/build.sh.
# KSTREAMS_JAVA_OPTS adds JVM options (the heap defaults to 512 MiB).
lib=$(dirname "$0")/kstreams-lib
java=java
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
	java=$JAVA_HOME/bin/java
fi
exec "$java" -Xms64m -Xmx512m -XX:+UseG1GC ${KSTREAMS_JAVA_OPTS:-} \
	-cp "$lib/kstreams-peer.jar:$lib/*" org.batonstreams.peer.Main "$@"
LAUNCHER
chmod +x "$launcher.tmp"
mv "$launcher.tmp" "$launcher"
