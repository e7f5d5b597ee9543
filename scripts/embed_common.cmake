# Helpers shared by the embed_*.cmake scripts that compile data files into the binary.
# embed_escape: a file's bytes as \xNN escapes inside a C string literal, 32 bytes per line,
# so no content (quotes, backslashes, non-UTF-8 bytes) can break the generated code; adjacent
# escapes cannot merge because each ends where the next backslash starts.
# embed_write: writes OUT only when its content changes, so re-runs do not force recompiles.

function(embed_escape path out_escaped out_size)
  file(READ "${path}" hex HEX)
  string(LENGTH "${hex}" hex_len)
  math(EXPR size "${hex_len} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" escaped "${hex}")
  # CMake regexes have no {n}, so the 32-byte group is spelled out.
  string(REPEAT "\\\\x[0-9a-f][0-9a-f]" 32 line_pattern)
  string(REGEX REPLACE "(${line_pattern})" "\\1\"\n    \"" escaped "${escaped}")
  set(${out_escaped} "${escaped}" PARENT_SCOPE)
  set(${out_size} "${size}" PARENT_SCOPE)
endfunction()

function(embed_write out content)
  get_filename_component(out_dir "${out}" DIRECTORY)
  file(MAKE_DIRECTORY "${out_dir}")
  file(WRITE "${out}.tmp" "${content}")
  file(COPY_FILE "${out}.tmp" "${out}" ONLY_IF_DIFFERENT)
  file(REMOVE "${out}.tmp")
endfunction()
