//! DrawingML charts (`c:chartSpace` parts, shared by DOCX, PPTX and XLSX): the title,
//! the kind ("Bar chart") and the data the chart caches, as a table with one column
//! per series and one row per category.

use super::blocks::Blocks;
use super::xml::Element;
use crate::parse::{DescriptionSource, Image, Table};

/// Most categories read from one chart (a chart over a whole column can cache
/// hundreds of thousands of points).
const MAX_POINTS: usize = 10_000;

/// What one chart part says.
#[derive(Debug, Default, PartialEq)]
pub struct Chart {
    pub title: Option<String>,
    /// "Bar chart", "Line chart"...
    pub kind: String,
    pub data: Table,
}

/// Reads a chart part.
pub fn read(root: &Element) -> Chart {
    let chart = root.child("chart").unwrap_or(root);
    let title = chart
        .child("title")
        .map(paragraphs_text)
        .filter(|t| !t.is_empty());
    let plot = chart.child("plotArea");
    let mut kind = String::from("Chart");
    let mut series: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
    if let Some(plot) = plot {
        for group in plot.elements().filter(|e| e.name().ends_with("Chart")) {
            if kind == "Chart" {
                kind = kind_name(group.name()).to_owned();
            }
            for ser in group.children_named("ser") {
                let name = ser
                    .child("tx")
                    .map(|t| cached_points(t).join(" "))
                    .filter(|n| !n.is_empty())
                    .or_else(|| ser.child("tx").map(|t| t.text()))
                    .unwrap_or_default();
                let cats = ser
                    .child("cat")
                    .or_else(|| ser.child("xVal"))
                    .map(cached_points)
                    .unwrap_or_default();
                let vals = ser
                    .child("val")
                    .or_else(|| ser.child("yVal"))
                    .map(cached_points)
                    .unwrap_or_default();
                series.push((name, cats, vals));
            }
        }
    }
    let n = series
        .iter()
        .map(|(_, c, v)| c.len().max(v.len()))
        .max()
        .unwrap_or(0)
        .min(MAX_POINTS);
    let mut rows = Vec::new();
    if n > 0 {
        let mut header = vec![String::new()];
        header.extend(series.iter().map(|(name, _, _)| name.clone()));
        rows.push(header);
        let cats = series
            .iter()
            .map(|(_, c, _)| c)
            .find(|c| !c.is_empty())
            .cloned()
            .unwrap_or_default();
        for i in 0..n {
            let mut row = vec![cats.get(i).cloned().unwrap_or_default()];
            row.extend(
                series
                    .iter()
                    .map(|(_, _, v)| v.get(i).cloned().unwrap_or_default()),
            );
            rows.push(row);
        }
    }
    Chart {
        title,
        kind,
        data: Table { rows },
    }
}

impl Chart {
    /// Appends the chart: its title, an image block saying what kind of chart it is
    /// ("Bar chart"), and its data table.
    pub fn push_to(self, out: &mut Blocks, width: u32, height: u32) {
        if let Some(t) = &self.title {
            out.paragraph(t);
        }
        out.image(Image {
            width,
            height,
            description: self.kind,
            description_source: DescriptionSource::Size,
        });
        out.table(self.data);
    }
}

/// Text of `a:p` paragraphs below `el`, one line each.
fn paragraphs_text(el: &Element) -> String {
    let paras = el.find_all("p");
    if paras.is_empty() {
        return cached_points(el).join(" ");
    }
    paras
        .iter()
        .map(|p| p.find_all("t").iter().map(|t| t.text()).collect::<String>())
        .filter(|s| !s.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Cached values of a `strRef`/`numRef`/literal below `el`, in point order.
fn cached_points(el: &Element) -> Vec<String> {
    let Some(cache) = ["strCache", "numCache", "strLit", "numLit"]
        .iter()
        .find_map(|n| el.find(n))
    else {
        return Vec::new();
    };
    let count = cache
        .child("ptCount")
        .and_then(|c| c.attr("val"))
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_POINTS);
    let pts: Vec<(usize, String)> = cache
        .children_named("pt")
        .filter_map(|p| {
            let idx = p.attr("idx")?.parse::<usize>().ok()?;
            (idx < MAX_POINTS).then(|| (idx, p.child("v").map(|v| v.text()).unwrap_or_default()))
        })
        .collect();
    let len = count.max(pts.iter().map(|(i, _)| i + 1).max().unwrap_or(0));
    let mut out = vec![String::new(); len];
    for (i, v) in pts {
        out[i] = v;
    }
    out
}

fn kind_name(element: &str) -> &'static str {
    match element {
        "barChart" | "bar3DChart" => "Bar chart",
        "lineChart" | "line3DChart" => "Line chart",
        "pieChart" | "pie3DChart" | "ofPieChart" => "Pie chart",
        "doughnutChart" => "Doughnut chart",
        "areaChart" | "area3DChart" => "Area chart",
        "scatterChart" => "Scatter chart",
        "radarChart" => "Radar chart",
        "bubbleChart" => "Bubble chart",
        "stockChart" => "Stock chart",
        "surfaceChart" | "surface3DChart" => "Surface chart",
        _ => "Chart",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::office::xml;

    #[test]
    fn reads_title_kind_and_data() {
        let x = br#"<c:chartSpace xmlns:c="c" xmlns:a="a"><c:chart><c:title><c:tx><c:rich><a:p><a:r><a:t>Ducks</a:t></a:r></a:p></c:rich></c:tx></c:title><c:plotArea><c:barChart><c:ser><c:tx><c:strRef><c:strCache><c:ptCount val="1"/><c:pt idx="0"><c:v>Fresh</c:v></c:pt></c:strCache></c:strRef></c:tx><c:cat><c:strRef><c:strCache><c:ptCount val="2"/><c:pt idx="0"><c:v>2019</c:v></c:pt><c:pt idx="1"><c:v>2020</c:v></c:pt></c:strCache></c:strRef></c:cat><c:val><c:numRef><c:numCache><c:ptCount val="2"/><c:pt idx="0"><c:v>120</c:v></c:pt><c:pt idx="1"><c:v>130</c:v></c:pt></c:numCache></c:numRef></c:val></c:ser></c:barChart></c:plotArea></c:chart></c:chartSpace>"#;
        let c = read(&xml::parse(x).unwrap());
        assert_eq!(c.title.as_deref(), Some("Ducks"));
        assert_eq!(c.kind, "Bar chart");
        assert_eq!(
            c.data.rows,
            vec![
                vec!["".to_string(), "Fresh".into()],
                vec!["2019".into(), "120".into()],
                vec!["2020".into(), "130".into()],
            ]
        );
    }
}
