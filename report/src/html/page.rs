//! One self-contained HTML page: its style inlined, its charts inline SVG, nothing fetched.
//! Every text taken from a file goes through [`esc`].

/// Text as HTML: `&`, `<`, `>`, `"` and `'` replaced by their character references.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em auto;max-width:1180px;color:#222;\
padding:0 1em}h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;\
margin-top:1.6em}table{border-collapse:collapse;font-size:.85em;margin:.5em 0}\
td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right;vertical-align:top}\
td:first-child,th:first-child{text-align:left}th{background:#f0f0f0}\
.answer li{margin:.3em 0}.warn li{margin:.2em 0}.bad{color:#b00;font-weight:bold}\
.chart svg{max-width:100%;height:auto;border:1px solid #ddd;margin:.5em 0}\
.note{color:#555;font-size:.9em}\
#medians-table td:not(:first-child):not(:last-child){white-space:nowrap}code{background:#f4f4f4;padding:0 .2em}";

/// A page being built: sections appended in order.
#[derive(Default)]
pub struct Page {
    body: String,
}

impl Page {
    /// `<h1>` or `<h2>` with escaped text.
    pub fn heading(&mut self, level: u8, text: &str, id: &str) {
        self.body.push_str(&format!(
            "<h{level} id=\"{}\">{}</h{level}>\n",
            esc(id),
            esc(text)
        ));
    }

    /// A paragraph of escaped text, with an optional class.
    pub fn para(&mut self, text: &str, class: &str) {
        if class.is_empty() {
            self.body.push_str(&format!("<p>{}</p>\n", esc(text)));
        } else {
            self.body
                .push_str(&format!("<p class=\"{class}\">{}</p>\n", esc(text)));
        }
    }

    /// A list of escaped items; items starting with `!` are drawn as alarms.
    pub fn list(&mut self, class: &str, items: &[String]) {
        self.body.push_str(&format!("<ul class=\"{class}\">\n"));
        for i in items {
            match i.strip_prefix('!') {
                Some(alarm) => self
                    .body
                    .push_str(&format!("<li class=\"bad\">{}</li>\n", esc(alarm))),
                None => self.body.push_str(&format!("<li>{}</li>\n", esc(i))),
            }
        }
        self.body.push_str("</ul>\n");
    }

    /// A table of escaped cells; `id` names it for readers and tests.
    pub fn table(&mut self, id: &str, header: &[&str], rows: &[Vec<String>]) {
        self.body
            .push_str(&format!("<table id=\"{}\">\n<thead><tr>", esc(id)));
        for h in header {
            self.body.push_str(&format!("<th>{}</th>", esc(h)));
        }
        self.body.push_str("</tr></thead>\n<tbody>\n");
        for r in rows {
            self.body.push_str("<tr>");
            for c in r {
                self.body.push_str(&format!("<td>{}</td>", esc(c)));
            }
            self.body.push_str("</tr>\n");
        }
        self.body.push_str("</tbody></table>\n");
    }

    /// A chart: an SVG document drawn by this crate (plotters escapes its text), inlined
    /// without its XML namespace attribute (HTML needs none, and it names a URL).
    pub fn svg(&mut self, id: &str, caption: &str, svg: &str) {
        let start = svg.find("<svg").unwrap_or(0);
        let inline = svg[start..].replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1);
        self.body.push_str(&format!(
            "<figure class=\"chart\" id=\"{}\">\n{inline}<figcaption class=\"note\">{}</figcaption></figure>\n",
            esc(id),
            esc(caption)
        ));
    }

    /// The whole document.
    pub fn finish(self, title: &str) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{}</body>\n</html>\n",
            esc(title),
            self.body
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_files_is_escaped() {
        assert_eq!(
            esc("<script>a & 'b' \"c\"</script>"),
            "&lt;script&gt;a &amp; &#39;b&#39; &quot;c&quot;&lt;/script&gt;"
        );
        let mut p = Page::default();
        p.table("t", &["<h>"], &[vec!["<img src=x>".into()]]);
        p.list("warn", &["!<b>".into()]);
        let html = p.finish("<t>");
        assert!(!html.contains("<img") && !html.contains("<b>") && !html.contains("<h>"));
        assert!(html.contains("&lt;img src=x&gt;"));
    }

    #[test]
    fn charts_are_inlined_without_the_namespace_url() {
        let mut p = Page::default();
        p.svg(
            "c",
            "cap",
            "<?xml version=\"1.0\"?>\n<svg width=\"10\" height=\"10\" viewBox=\"0 0 10 10\" xmlns=\"http://www.w3.org/2000/svg\">\n</svg>\n",
        );
        let html = p.finish("t");
        assert!(html.contains("<svg width=\"10\""));
        assert!(!html.contains("http") && !html.contains("<?xml"));
    }
}
