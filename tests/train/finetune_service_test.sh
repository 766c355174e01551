#!/usr/bin/env bash
# examples/finetune_service: artifacts from `kgrad train-artifacts`, 5 steps in
# process, then 5 more resumed from its checkpoint (step 10), and the loss on the
# evaluated batch lower after than before; a wrong input is refused by name.
set -euo pipefail
root="$TEST_SRCDIR/$TEST_WORKSPACE"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
data="$root/tests/train/data"
"$root/tools/kgrad" train-artifacts "$data/resnet.onnx" --optimizer adamw --lr 5e-3 -o "$tmp/run" > /dev/null
service="$root/examples/finetune_service"
first=$("$service" "$tmp/run" "$data/resnet_x_0.npy" "$data/resnet_target_0.npy" 5 4)
second=$("$service" "$tmp/run" "$data/resnet_x_0.npy" "$data/resnet_target_0.npy" 5 4)
echo "$first"; echo "$second"
[[ "$first" == "step 5: "* ]] || { echo "FAIL: first run did not end at step 5"; exit 1; }
[[ "$second" == "step 10: "* ]] || { echo "FAIL: the second run did not resume to step 10"; exit 1; }
# "eval loss on batch 0 A -> B": B < A after ten steps on that batch.
read -r a b < <(echo "$first" | sed -E 's/.*batch 0 ([^ ]+) -> ([^;]+);.*/\1 \2/')
awk -v a="$a" -v b="$b" 'BEGIN { exit !(b < a) }' || { echo "FAIL: loss $a -> $b did not fall"; exit 1; }
if err=$("$service" "$tmp/run" "$data/resnet_target_0.npy" "$data/resnet_target_0.npy" 1 2>&1); then
  echo "FAIL: a target array as the image input was accepted"; exit 1
fi
[[ "$err" == *"input 'x': wrong dtype"* ]] || { echo "FAIL: unexpected error: $err"; exit 1; }
echo PASS
