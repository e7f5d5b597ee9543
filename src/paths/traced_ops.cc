#include "paths/traced_ops.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>

#include "util/error.h"

namespace shardtrace::traced {
namespace {

using Args = std::vector<const Array*>;
using Cotangents = std::vector<Array>;

// The VJP of an op that only selects elements of its first input: `select` replayed on
// positions (numeric/vjp.h); the other inputs (indices) carry none.
Tracer::Vjp Selection(std::function<Array(const Array& positions, const Args& inputs)> select) {
  return [select = std::move(select)](const Args& a, const Args&, const Args& g) {
    Cotangents cts(a.size());
    cts[0] =
        SelectionVjp([&](const Array& p) { return select(p, a); }, a[0]->shape, a[0]->dtype, *g[0]);
    return cts;
  };
}

std::string Squash(const std::string& s) {
  std::string out;
  for (const char c : s)
    if (c != ' ') out += c;
  return out;
}

}  // namespace

Value Einsum(Tracer& t, const std::string& equation, const Value& a, const Value& b,
             DType out_dtype, const Out& out) {
  OpDesc op(OpKind::kEinsum, Squash(equation));
  op.einsum = ParseEinsum(equation);
  const ParsedEinsum& parsed = *op.einsum;
  return t.Apply(
      op, {&a, &b}, out,
      [&](const Args& x) { return shardtrace::Einsum(parsed, *x[0], *x[1], out_dtype); },
      [parsed](const Args& x, const Args&, const Args& g) {
        auto [da, db] = EinsumVjp(parsed, *x[0], *x[1], *g[0]);
        return Cotangents{std::move(da), std::move(db)};
      });
}

Value Cast(Tracer& t, const Value& x, DType dtype, const Out& out_in) {
  // A cast weight (w0_kernel = wi_0.astype(dtype)) is still a weight.
  Out out = out_in;
  out.kind = t.trace().tensors[x.tensor].kind;
  return t.Apply(
      {OpKind::kAstype, "", {{"dtype", ToString(dtype)}}}, {&x}, out,
      [&](const Args& a) { return shardtrace::Cast(*a[0], dtype); },
      [](const Args& a, const Args&, const Args& g) {
        return Cotangents{IsFloating(a[0]->dtype) ? CastVjp(*a[0], *g[0]) : Array{}};
      });
}

Value Reshape(Tracer& t, const Value& x, const Shape& shape, const Out& out) {
  return t.Apply(
      {OpKind::kReshape, "", {{"shape", ShapeToString(shape)}}}, {&x}, out,
      [&](const Args& a) { return shardtrace::Reshape(*a[0], shape); },
      [](const Args& a, const Args&, const Args& g) {
        return Cotangents{g[0]->WithShape(a[0]->shape)};
      });
}

Value Dequantize(Tracer& t, const Value& w, const Value& scale, DType dtype, const Out& out_in) {
  // Copies: recording an op grows the trace's tensor list.
  const TensorRecord wr = t.trace().tensors[w.tensor];
  const TensorRecord sr = t.trace().tensors[scale.tensor];
  const Shape& w_shape = wr.shape;
  const Shape& s_shape = sr.shape;
  const std::string& w_dims = wr.dims;
  Out out = out_in;
  out.kind = wr.kind;  // the dequantized kernel is still a weight, as a cast one is
  const Value w_c = Cast(t, w, dtype, out);
  const Value s_c = Cast(t, scale, dtype, {out.name + "_scale", sr.dims, sr.kind});
  if (s_shape.size() < w_shape.size()) {
    // Per tensor (a scalar) or per expert ([E] on [E, M, H]): broadcast over the rest.
    Shape lead = s_shape;
    std::string dims = sr.dims;
    while (lead.size() < w_shape.size()) {
      lead.push_back(1);
      dims += '1';
    }
    const Value s_b = s_shape.empty() ? s_c : Reshape(t, s_c, lead, {out.name + "_scale", dims});
    return Binary(t, OpKind::kMul, w_c, s_b, out);
  }
  Shape interleaved, scale_shape;
  std::string w_letters, s_letters;
  for (size_t d = 0; d < w_shape.size(); ++d) {
    if (s_shape[d] <= 0 || w_shape[d] % s_shape[d] != 0)
      Fail(
          "{}: block scaling requires weight dimensions {} to be divisible by scale dimensions {} "
          "(weight_block_size): MaxText's dequantize_weight raises ValueError",
          out.name, ShapeToString(w_shape), ShapeToString(s_shape));
    const int64_t block = w_shape[d] / s_shape[d];
    interleaved.insert(interleaved.end(), {s_shape[d], block});
    scale_shape.insert(scale_shape.end(), {s_shape[d], 1});
    // A dim keeps its letter where it is the whole kernel dim; block counts and sizes have none.
    const char whole = w_dims[d];
    w_letters += s_shape[d] == 1 ? '1' : block == 1 ? whole : '-';
    w_letters += block == 1 ? '1' : s_shape[d] == 1 ? whole : '-';
    s_letters += s_shape[d] == 1 ? '1' : block == 1 ? whole : '-';
    s_letters += '1';
  }
  const Value w_i = Reshape(t, w_c, interleaved, {out.name, w_letters, wr.kind});
  const Value s_i = Reshape(t, s_c, scale_shape, {out.name + "_scale", s_letters, sr.kind});
  const Value product = Binary(t, OpKind::kMul, w_i, s_i, {out.name, w_letters, wr.kind});
  return Reshape(t, product, w_shape, out);
}

Value Activation(Tracer& t, const std::string& name, const Value& x, const Out& out) {
  // routed_score_func may name softmax, which is not an elementwise activation.
  if (name == "softmax")
    return t.Apply(
        {OpKind::kSoftmax, "", {}}, {&x}, out,
        [&](const Args& a) { return shardtrace::Softmax(*a[0], -1); },
        [](const Args&, const Args& y, const Args& g) {
          return Cotangents{SoftmaxVjp(*y[0], *g[0], -1)};
        });
  return t.Apply(
      OpDesc::Activation(name), {&x}, out,
      [&](const Args& a) { return shardtrace::Activation(name, *a[0]); },
      [name](const Args& a, const Args&, const Args& g) {
        return Cotangents{ActivationVjp(name, *a[0], *g[0])};
      });
}

Value Softmax(Tracer& t, const Value& x, const Out& out) {
  return t.Apply(
      {OpKind::kSoftmax, "", {{"axis", "-1"}}}, {&x}, out,
      [&](const Args& a) { return shardtrace::Softmax(*a[0], -1); },
      [](const Args&, const Args& y, const Args& g) {
        return Cotangents{SoftmaxVjp(*y[0], *g[0], -1)};
      });
}

namespace {

// The VJP of the arithmetic binary ops; comparisons and integer division have none (their
// results are bool or integer, which carry no cotangent).
Tracer::Vjp BinaryVjp(OpKind kind) {
  using Rule = std::pair<Array, Array> (*)(const Array&, const Array&, const Array&);
  Rule rule = nullptr;
  if (kind == OpKind::kAdd) rule = AddVjp;
  if (kind == OpKind::kSub) rule = SubVjp;
  if (kind == OpKind::kMul) rule = MulVjp;
  if (kind == OpKind::kDiv) rule = DivVjp;
  if (rule == nullptr) return nullptr;
  return [rule](const Args& x, const Args&, const Args& g) {
    auto [da, db] = rule(*x[0], *x[1], *g[0]);
    return Cotangents{std::move(da), std::move(db)};
  };
}

}  // namespace

Value Binary(Tracer& t, OpKind kind, const Value& a, const Value& b, const Out& out) {
  if (!IsBinary(kind)) throw std::logic_error("not a binary op: " + ToString(kind));
  return t.Apply(
      {kind, "", {}}, {&a, &b}, out,
      [&](const Args& x) {
        switch (kind) {
          case OpKind::kAdd:
            return shardtrace::Add(*x[0], *x[1]);
          case OpKind::kSub:
            return shardtrace::Sub(*x[0], *x[1]);
          case OpKind::kMul:
            return shardtrace::Mul(*x[0], *x[1]);
          case OpKind::kDiv:
            return shardtrace::Div(*x[0], *x[1]);
          case OpKind::kLessEqual:
            return shardtrace::LessEqual(*x[0], *x[1]);
          case OpKind::kLess:
            return shardtrace::Less(*x[0], *x[1]);
          case OpKind::kEqual:
            return shardtrace::Equal(*x[0], *x[1]);
          case OpKind::kGreater:
            return shardtrace::Greater(*x[0], *x[1]);
          case OpKind::kFloorDivide:
            return shardtrace::FloorDivide(*x[0], *x[1]);
          case OpKind::kMod:
            return shardtrace::Mod(*x[0], *x[1]);
          default:
            throw std::logic_error("not a binary op: " + ToString(kind));
        }
      },
      BinaryVjp(kind));
}

Value Constant(Tracer& t, const Array& value, const Out& out) {
  return t.Apply({OpKind::kConstant, "", {}}, {}, out, [&](const Args&) {
    return t.numeric() ? value : Array::Symbolic(value.shape, value.dtype);
  });
}

Value CheckpointName(Tracer& t, const Value& x, const std::string& name, const std::string& inner) {
  const TensorRecord& in = t.trace().tensors[x.tensor];
  Value out = t.Apply(
      {OpKind::kCheckpointName, "", {{"name", name}}}, {&x}, {in.name, in.dims, in.kind},
      [](const Args& a) { return *a[0]; }, Tracer::IdentityVjp());
  if (!inner.empty()) t.trace().checkpoint_tags.push_back({out.tensor, inner});
  t.trace().checkpoint_tags.push_back({out.tensor, name});
  return out;
}

void Tag(Tracer& t, const Value& x, const std::string& name) {
  t.trace().checkpoint_tags.push_back({x.tensor, name});
}

namespace {

Value Allocate(Tracer& t, OpKind kind, const Shape& shape, DType dtype, const Out& out) {
  Shape recorded = shape;
  if (!recorded.empty()) recorded[0] = t.RecordedRows(out.dims, recorded[0]);
  return t.Apply({kind, "", {{"shape", ShapeToString(recorded)}}}, {}, out, [&](const Args&) {
    return t.numeric() ? Array::Filled(shape, dtype, 0.0f) : Array::Symbolic(shape, dtype);
  });
}

}  // namespace

Value Zeros(Tracer& t, const Shape& shape, DType dtype, const Out& out) {
  return Allocate(t, OpKind::kZeros, shape, dtype, out);
}

Value Empty(Tracer& t, const Shape& shape, DType dtype, const Out& out) {
  return Allocate(t, OpKind::kEmpty, shape, dtype, out);
}

Value Sum(Tracer& t, const Value& x, int64_t axis, bool keepdims, const Out& out) {
  return t.Apply(
      {OpKind::kSum, "", {{"axis", std::to_string(axis)}}}, {&x}, out,
      [&](const Args& a) { return shardtrace::Sum(*a[0], axis, keepdims); },
      [axis, keepdims](const Args& a, const Args&, const Args& g) {
        return Cotangents{SumVjp(*a[0], {axis}, keepdims, *g[0])};
      });
}

Value Mean(Tracer& t, const Value& x, int64_t axis, const Out& out) {
  return t.Apply(
      {OpKind::kMean, "", {{"axis", std::to_string(axis)}}}, {&x}, out,
      [&](const Args& a) { return shardtrace::Mean(*a[0], axis, false); },
      [axis](const Args& a, const Args&, const Args& g) {
        return Cotangents{MeanVjp(*a[0], {axis}, false, *g[0])};
      });
}

Value Cumsum(Tracer& t, const Value& x, int64_t axis, const Out& out) {
  return t.Apply({OpKind::kCumsum, "", {{"axis", std::to_string(axis)}}}, {&x}, out,
                 [&](const Args& a) { return shardtrace::Cumsum(*a[0], axis); });
}

Value OneHot(Tracer& t, const Value& indices, int64_t depth, DType dtype, const Out& out) {
  return t.Apply(
      {OpKind::kOneHot, "", {{"num_classes", std::to_string(depth)}, {"dtype", ToString(dtype)}}},
      {&indices}, out, [&](const Args& a) { return shardtrace::OneHot(*a[0], depth, dtype); });
}

std::pair<Value, Value> TopK(Tracer& t, const Value& x, int64_t k, const Out& values,
                             const Out& indices) {
  std::vector<Value> r = t.ApplyN(
      {OpKind::kTopK, "", {{"k", std::to_string(k)}}}, {&x}, {values, indices},
      [&](const Args& a) {
        TopKResult top = shardtrace::TopK(*a[0], k);
        return std::vector<Array>{std::move(top.values), std::move(top.indices)};
      },
      // The values are x taken at the indices the op chose.
      [](const Args& a, const Args& outs, const Args& g) {
        const Array indices = *outs[1];
        return Cotangents{
            SelectionVjp([&](const Array& p) { return shardtrace::TakeAlongAxis(p, indices, -1); },
                         a[0]->shape, a[0]->dtype, *g[0])};
      });
  return {std::move(r[0]), std::move(r[1])};
}

Value TakeAlongAxis(Tracer& t, const Value& x, const Value& indices, int64_t axis, const Out& out) {
  return t.Apply(
      {OpKind::kTakeAlongAxis, "", {{"axis", std::to_string(axis)}}}, {&x, &indices}, out,
      [&](const Args& a) { return shardtrace::TakeAlongAxis(*a[0], *a[1], axis); },
      Selection([axis](const Array& p, const Args& a) {
        return shardtrace::TakeAlongAxis(p, *a[1], axis);
      }));
}

Value Take(Tracer& t, const Value& x, const Value& indices, int64_t axis, const Out& out) {
  return t.Apply(
      {OpKind::kTake, "", {{"axis", std::to_string(axis)}}}, {&x, &indices}, out,
      [&](const Args& a) { return shardtrace::Take(*a[0], *a[1], axis); },
      Selection(
          [axis](const Array& p, const Args& a) { return shardtrace::Take(p, *a[1], axis); }));
}

Value Argsort(Tracer& t, const Value& x, const Out& out) {
  return t.Apply({OpKind::kArgsort, "", {{"stable", "True"}}}, {&x}, out,
                 [&](const Args& a) { return shardtrace::ArgsortStable(*a[0], -1); });
}

Value Bincount(Tracer& t, const Value& x, int64_t length, const Out& out) {
  return t.Apply({OpKind::kBincount, "", {{"length", std::to_string(length)}}}, {&x}, out,
                 [&](const Args& a) { return shardtrace::Bincount(*a[0], length); });
}

Value Repeat(Tracer& t, const Value& x, int64_t repeats, int64_t axis, const Out& out) {
  return t.Apply(
      {OpKind::kRepeat, "", {{"repeats", std::to_string(repeats)}, {"axis", std::to_string(axis)}}},
      {&x}, out, [&](const Args& a) { return shardtrace::Repeat(*a[0], repeats, axis); },
      Selection([repeats, axis](const Array& p, const Args&) {
        return shardtrace::Repeat(p, repeats, axis);
      }));
}

Value RepeatBy(Tracer& t, const Value& x, const Value& repeats, int64_t total, const Out& out) {
  return t.Apply(
      {OpKind::kRepeat,
       "",
       {{"total_repeat_length", std::to_string(t.RecordedRows(out.dims, total))}}},
      {&x, &repeats}, out,
      [&](const Args& a) { return shardtrace::Repeat(*a[0], *a[1], 0, total); },
      Selection([total](const Array& p, const Args& a) {
        return shardtrace::Repeat(p, *a[1], 0, total);
      }));
}

Value Where(Tracer& t, const Value& cond, const Value& a, const Value& b, const Out& out) {
  return t.Apply(
      {OpKind::kWhere, "", {}}, {&cond, &a, &b}, out,
      [&](const Args& x) { return shardtrace::Where(*x[0], *x[1], *x[2]); },
      [](const Args& x, const Args&, const Args& g) {
        auto [da, db] = WhereVjp(*x[0], *x[1], *x[2], *g[0]);
        return Cotangents{Array{}, std::move(da), std::move(db)};
      });
}

Value Clip(Tracer& t, const Value& x, std::optional<float> lo, std::optional<float> hi,
           const Out& out) {
  return t.Apply(
      {OpKind::kClip,
       "",
       {{"min", lo ? fmt::format("{}", *lo) : "None"},
        {"max", hi ? fmt::format("{}", *hi) : "None"}}},
      {&x}, out, [&](const Args& a) { return shardtrace::Clip(*a[0], lo, hi); },
      [lo, hi](const Args& a, const Args&, const Args& g) {
        return Cotangents{ClipVjp(*a[0], lo, hi, *g[0])};
      });
}

Value Slice(Tracer& t, const Value& x, int64_t axis, int64_t start, int64_t size, const Out& out) {
  return t.Apply(
      {OpKind::kSlice,
       "",
       {{"axis", std::to_string(axis)},
        {"start", std::to_string(start)},
        {"size", std::to_string(size)}}},
      {&x}, out, [&](const Args& a) { return shardtrace::Slice(*a[0], axis, start, size); },
      Selection([axis, start, size](const Array& p, const Args&) {
        return shardtrace::Slice(p, axis, start, size);
      }));
}

Value Concatenate(Tracer& t, const std::vector<Value>& parts, int64_t axis, const Out& out) {
  std::vector<const Value*> inputs;
  std::vector<int64_t> sizes;
  for (const Value& p : parts) {
    inputs.push_back(&p);
    sizes.push_back(p.dim(static_cast<int>(axis)));
  }
  return t.Apply(
      {OpKind::kConcatenate, "", {{"axis", std::to_string(axis)}}}, inputs, out,
      [axis](const Args& a) {
        std::vector<Array> arrays;
        for (const Array* x : a) arrays.push_back(*x);
        return shardtrace::Concat(arrays, axis);
      },
      [axis, sizes](const Args&, const Args&, const Args& g) {
        std::vector<Array> grads;
        int64_t start = 0;
        for (const int64_t n : sizes) {
          grads.push_back(shardtrace::Slice(*g[0], axis, start, n));
          start += n;
        }
        return grads;
      });
}

}  // namespace shardtrace::traced
