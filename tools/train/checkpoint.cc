#include "tools/train/checkpoint.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "proto/convert.h"
#include "tools/train/atomic_file.h"
#include "proto/checkpoint.pb.h"

namespace kgrad {
namespace train {
namespace {

constexpr int64_t kFormatVersion = 1;

void PutTensors(const NamedTensors& from,
                google::protobuf::RepeatedPtrField<proto::WeightProto>* to) {
  for (const auto& [name, t] : from) {
    proto::WeightProto* w = to->Add();
    w->set_name(name);
    TensorToProto(t, w->mutable_value());
  }
}

absl::StatusOr<NamedTensors> GetTensors(
    const google::protobuf::RepeatedPtrField<proto::WeightProto>& from, const std::string& path) {
  NamedTensors out;
  for (const proto::WeightProto& w : from) {
    absl::StatusOr<Tensor> t = TensorFromProto(w.value(), LoadLimits());
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", w.name(), "': ", t.status().message()));
    }
    out.emplace_back(w.name(), std::move(*t));
  }
  return out;
}

std::string Describe(const Tensor& t) { return t.TypeString(); }

}  // namespace

absl::Status SaveCheckpoint(const Checkpoint& c, const std::string& path) {
  proto::CheckpointProto p;
  p.set_format_version(kFormatVersion);
  p.set_producer("kgrad");
  p.set_optimizer(c.optimizer);
  p.set_step(c.step);
  p.set_epoch(c.epoch);
  p.set_batch(c.batch);
  p.set_seed(c.seed);
  for (const std::string& n : c.trainable) p.add_trainable(n);
  PutTensors(c.weights, p.mutable_weights());
  PutTensors(c.state, p.mutable_state());
  std::string bytes;
  if (!p.SerializeToString(&bytes)) {
    return absl::InternalError(absl::StrCat(path, ": the checkpoint does not serialise (over 2 GiB?)"));
  }
  return WriteFileAtomically(path, bytes);
}

absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path) {
  KGRAD_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path, LoadLimits().max_file_bytes));
  proto::CheckpointProto p;
  if (!p.ParseFromString(bytes) || p.format_version() != kFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a kgrad checkpoint (format version ", kFormatVersion, "), or truncated"));
  }
  if (p.step() < 0 || p.epoch() < 0 || p.batch() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": negative step, epoch or batch"));
  }
  Checkpoint c;
  c.optimizer = p.optimizer();
  c.step = p.step();
  c.epoch = p.epoch();
  c.batch = p.batch();
  c.seed = p.seed();
  c.trainable.assign(p.trainable().begin(), p.trainable().end());
  KGRAD_ASSIGN_OR_RETURN(c.weights, GetTensors(p.weights(), path));
  KGRAD_ASSIGN_OR_RETURN(c.state, GetTensors(p.state(), path));
  return c;
}

absl::Status CheckSameTensors(const NamedTensors& want, const NamedTensors& got,
                              const std::string& what, const std::string& file) {
  for (size_t i = 0; i < want.size() || i < got.size(); ++i) {
    if (i >= got.size()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": no ", what, " '", want[i].first,
                                                     "' (a checkpoint of another model?)"));
    }
    if (i >= want.size()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": ", what, " '", got[i].first,
                                                     "' is not in this model (a checkpoint of another model?)"));
    }
    const auto& [wn, wt] = want[i];
    const auto& [gn, gt] = got[i];
    if (wn != gn || wt.dtype() != gt.dtype() || wt.shape() != gt.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": ", what, " ", i, " is '", gn, "' ", Describe(gt), ", the model's is '", wn, "' ",
          Describe(wt), " (a checkpoint of another model?)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace train
}  // namespace kgrad
