#!/bin/sh
# Waits for the Temporal frontend, then creates the namespace and registers
# transcriber's search attributes on it. transcriber registers missing
# attributes itself when a role starts; doing it here first means the roles,
# which start together and may be scaled, find them present instead of
# racing each other to add them. Everything is idempotent.
# The temporal CLI reads TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE itself.
set -eu

: "${TEMPORAL_NAMESPACE:=default}"
: "${TEMPORAL_RETENTION:=168h}"

tries=0
until temporal operator cluster health >/dev/null 2>&1; do
	tries=$((tries + 1))
	if [ "$tries" -ge 60 ]; then
		echo "temporal at $TEMPORAL_ADDRESS is not healthy after 60 tries" >&2
		exit 1
	fi
	sleep 2
done

if ! temporal operator namespace describe --namespace "$TEMPORAL_NAMESPACE" >/dev/null 2>&1; then
	temporal operator namespace create --namespace "$TEMPORAL_NAMESPACE" --retention "$TEMPORAL_RETENTION"
fi

# Keep in step with workflows.SearchAttributes().
for name in TranscriptionState TranscriptionSource TranscriptionEngine TranscriptionReview TranscriptionOwner; do
	temporal operator search-attribute create --namespace "$TEMPORAL_NAMESPACE" --name "$name" --type Keyword
done
temporal operator search-attribute list --namespace "$TEMPORAL_NAMESPACE"
