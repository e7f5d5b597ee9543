#include "emit/html_report.h"

#include <fmt/format.h>

#include <kainjow/mustache.hpp>

#include "util/error.h"

namespace shardtrace {

using kainjow::mustache::data;
using kainjow::mustache::mustache;

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string HtmlTableMarkup(const HtmlTable& table) {
  const std::string id = HtmlEscape(table.id);
  std::string out = fmt::format(
      "<div class=\"table-tools\"><input class=\"filter\" type=\"search\" data-table=\"{0}\" "
      "data-count=\"{0}-count\" placeholder=\"Filter {1}: words all rows must contain\" "
      "aria-label=\"Filter {1}\"><span class=\"count\" id=\"{0}-count\">{2} rows</span></div>\n",
      id, HtmlEscape(table.caption), table.rows.size());
  out += fmt::format("<div class=\"table-box\"><table class=\"sortable\" id=\"{}\">\n<thead><tr>",
                     id);
  for (const std::string& h : table.headers) out += "<th>" + HtmlEscape(h) + "</th>";
  out += "</tr></thead>\n<tbody>\n";
  for (const std::vector<HtmlTable::Cell>& row : table.rows) {
    out += "<tr>";
    for (const HtmlTable::Cell& cell : row) {
      if (cell.sort_value)
        out += fmt::format("<td class=\"num\" data-v=\"{}\">{}</td>", *cell.sort_value,
                           HtmlEscape(cell.text));
      else
        out += "<td>" + HtmlEscape(cell.text) + "</td>";
    }
    out += "</tr>\n";
  }
  return out + "</tbody>\n</table></div>\n";
}

std::string HtmlStaticTableMarkup(const HtmlTable& table) {
  std::string out = fmt::format("<table id=\"{}\">\n<thead><tr>", HtmlEscape(table.id));
  for (const std::string& h : table.headers) out += "<th>" + HtmlEscape(h) + "</th>";
  out += "</tr></thead>\n<tbody>\n";
  for (const std::vector<HtmlTable::Cell>& row : table.rows) {
    out += "<tr>";
    for (const HtmlTable::Cell& cell : row) {
      out += (cell.sort_value ? "<td class=\"num\">" : "<td>") + HtmlEscape(cell.text) + "</td>";
    }
    out += "</tr>\n";
  }
  return out + "</tbody>\n</table>\n";
}

std::string HtmlPre(std::string_view text) { return "<pre>" + HtmlEscape(text) + "</pre>\n"; }

std::string InlineSvg(std::string_view svg) {
  const size_t start = svg.find("<svg");
  if (start == std::string_view::npos) Fail("svg: the renderer's output holds no <svg> element");
  return "<div class=\"svg-box\">\n" + std::string(svg.substr(start)) + "</div>\n";
}

std::string RenderHtmlReport(const HtmlReport& report) {
  data view;
  view.set("command_name", HtmlEscape(report.command_name));
  view.set("title", HtmlEscape(report.title));
  view.set("generator", HtmlEscape(report.generator));
  view.set("has_command", !report.command.empty());
  view.set("command", HtmlEscape(report.command));
  view.set("summary", report.summary);
  data sections = data::type::list;
  for (const HtmlSection& s : report.sections) {
    data section;
    section.set("id", HtmlEscape(s.id));
    section.set("title", HtmlEscape(s.title));
    section.set("body", s.body);
    section.set("open", s.open);
    section.set("titled", !s.title.empty());
    sections.push_back(section);
  }
  view.set("sections", sections);
  mustache tmpl{std::string(HtmlReportTemplate())};
  if (!tmpl.is_valid())
    Fail("the embedded HTML report template does not parse: {}", tmpl.error_message());
  // Every value is escaped above (or is HTML made here): the template inserts them as they are.
  tmpl.set_custom_escape([](const std::string& text) { return text; });
  const std::string out = tmpl.render(view);
  if (!tmpl.is_valid()) Fail("rendering the HTML report template failed: {}", tmpl.error_message());
  return out;
}

}  // namespace shardtrace
