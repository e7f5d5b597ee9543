"""MaxText's own table of compile topologies, recorded as data for shardtrace's `fit`.

Reads maxtext.utils.accelerator_to_spec_map.UserFacingNameToSystemCharacteristics (the table
train_compile.get_topology_mesh resolves compile_topology with) and writes one JSON object:
  {"source": ..., "topologies": {name: {"platform", "topology", "devices_per_slice",
                                         "chip_config", "wrap"}}}
The C++ binary embeds the file (src/model/maxtext_topologies.json); rerun this after a
MaxText upgrade and review the diff.
Usage: export_topologies.py OUT.json
"""

import json
import sys
from importlib import metadata

from maxtext.utils import accelerator_to_spec_map


def main():
  table = accelerator_to_spec_map.UserFacingNameToSystemCharacteristics
  out = {
      "source": f"maxtext {metadata.version('maxtext')} maxtext/utils/accelerator_to_spec_map.py "
                "UserFacingNameToSystemCharacteristics",
      "topologies": {
          name: {
              "platform": spec.platform,
              "topology": spec.topology_name,
              "devices_per_slice": spec.devices_per_slice,
              "chip_config": spec.chip_config_name,
              "wrap": list(spec.wrap) if spec.wrap else None,
          } for name, spec in sorted(table.items())
      },
  }
  with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump(out, f, indent=0, sort_keys=True)
    f.write("\n")


if __name__ == "__main__":
  main()
