// How the emitters write the trace's dim letters (TensorRecord::dims, ir/trace.h) for a
// reader: each letter's label (most are the letter itself; a dim moe.py folds from two, such
// as local_permute's P*E slots, or a fixed size that is not the letter it resembles, such as
// the top 2 experts of a routing group, gets a label that says so), its meaning in the
// Definitions table, and einsum equations rewritten from moe.py's own letters into the
// page's (moe.py spells unpermute's sum "BKE,BK->BE" with B = tokens and E = embed; the page
// says TKM,TK->TM). Formatting only: the letters themselves are the tracer's.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ir/trace.h"

namespace shardtrace {

// "B", "P*E" (local_permute's flattened slots), "g2", "Gk", "Mc", "C+1", ...
std::string DimLabel(char letter);

// The dims of a tensor as the pages write them after its shape: "BSM", or, when a label
// is longer than one character, comma-separated ("B,S,G,g2").
std::string DimsText(std::string_view dims);

// What the letter names, context-free ("experts", "sequence"); "" for an unknown letter. A
// meaning that cites moe.py cites `revision`'s lines.
std::string DimMeaning(char letter, RevisionId revision);

// Every letter of the Definitions table, in the order it lists them.
std::string_view DimLetterOrder();

// The op's einsum in the page's letters: moe.py's letters renamed to the dims of the
// tensors the op reads and writes ("RK,GKN->RN" on x [U,M] and wi_0 [E,M,H] becomes
// "UM,EMH->UH"), in the trace's one-character letters. nullopt when the op has no parsed
// einsum or the renaming would not be one letter for one letter.
std::optional<ParsedEinsum> PageEinsum(const Trace& trace, const OpRecord& op);

// PageEinsum written with the labels ("UMc,EMcH->UH" for a pipeline chunk), or moe.py's
// equation unchanged when there is none.
std::string PageEquation(const Trace& trace, const OpRecord& op);

}  // namespace shardtrace
