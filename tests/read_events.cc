// read_events FILE...: reads TensorBoard event files with
// common/event_file.h's reader (every record's CRCs checked) and prints,
// per file, the number of events and each tag's count and last value.
// Exits 1 naming the file and offset of the first bad record.
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "common/event_file.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: read_events FILE...\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    auto events = psgd::ReadEventFile(argv[i]);
    if (!events.ok()) {
      std::fprintf(stderr, "read_events: %s\n",
                   events.status().ToString().c_str());
      return 1;
    }
    std::map<std::string, std::pair<int, float>> tags;
    for (const auto& e : *events) {
      for (const auto& v : e.summary().value()) {
        auto& t = tags[v.tag()];
        ++t.first;
        t.second = v.simple_value();
      }
    }
    std::printf("%s: %zu events\n", argv[i], events->size());
    for (const auto& [tag, t] : tags) {
      std::printf("  %s %d %g\n", tag.c_str(), t.first, t.second);
    }
  }
  return 0;
}
