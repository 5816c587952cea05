#!/usr/bin/env bash
# make fuzz: run every fuzz target for a bounded time each (default 2m).
# A crash leaves its input under the package's testdata/fuzz, which then
# becomes part of the seed corpus that `make test` runs. FUZZ_PARALLEL sets
# the number of fuzzing workers (go test's -parallel; default: GOMAXPROCS).
set -euo pipefail
cd "$(dirname "$0")/.."
time="${1:-2m}"
parallel=()
if [[ -n "${FUZZ_PARALLEL:-}" ]]; then
  parallel=(-parallel "$FUZZ_PARALLEL")
fi
targets=(
  "./internal/upstream FuzzParseChatRequest"
  "./internal/upstream FuzzDecodeString"
  "./internal/upstream FuzzParseRequestOnePass"
  "./internal/upstream FuzzEventReader"
  "./internal/upstream FuzzParseEvent"
  "./internal/upstream FuzzTailUsage"
  "./internal/upstream FuzzBodyUsage"
  "./internal/upstream FuzzEventUsage"
  "./internal/upstream FuzzDecodeUsage"
  "./internal/upstream FuzzEventReaderBuffered"
  "./internal/upstream FuzzSkipValue"
  "./internal/upstream FuzzParseRetryAfter"
  "./internal/upstream FuzzErrorAnswer"
  "./internal/upstream FuzzEventKinds"
  "./internal/upstream FuzzBedrockFrames"
  "./internal/upstream/anthropic FuzzStreamTranslator"
  "./internal/upstream/anthropic FuzzChatToMessages"
  "./internal/upstream/anthropic FuzzAppendString"
  "./internal/upstream/anthropicclient FuzzStreamTranslator"
  "./internal/upstream/anthropicclient FuzzMessagesToChat"
  "./internal/upstream/responsesclient FuzzStreamTranslator"
  "./internal/cache FuzzAssemble"
  "./internal/jsontext FuzzAppendString"
  "./internal/jsontext FuzzValid"
  "./internal/report FuzzCleanMessage"
  "./internal/routes FuzzParse"
  "./internal/watchdog FuzzParseHoldMode"
  "./internal/config FuzzByteSize"
  "./internal/config FuzzBool"
  "./internal/config FuzzDurationVariable"
)
for t in "${targets[@]}"; do
  set -- $t
  echo "== $2 ($1) for $time"
  go test -run '^$' -fuzz "^$2\$" -fuzztime "$time" ${parallel[@]+"${parallel[@]}"} "$1"
done
