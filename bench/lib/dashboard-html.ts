// Draws the keyroll dashboard as one HTML page (inline SVG), at the panels' own grid positions,
// in the colours of Grafana's dark theme, from the answers Prometheus gave to each panel's
// queries (bench/dashboard-picture.ts). Stats show their last value on the colour of its
// threshold, bar gauges one bar per series, time series bars (counts per step) or lines.

export interface PanelData {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  unit: string;
  decimals?: number;
  thresholds: { color: string; value: number | null }[];
  bars: boolean;
  series: { legend: string; points: [number, number][] }[];
}

const WIDTH = 1600;
const MARGIN = 8;
const ROW_HEIGHT = 34;
const COLUMN = (WIDTH - 2 * MARGIN) / 24;
const COLORS: Record<string, string> = { green: '#73bf69', orange: '#ff9830', red: '#f2495c' };
const PALETTE = ['#73bf69', '#f2cc0c', '#8ab8ff', '#ff780a', '#f2495c', '#5794f2', '#b877d9', '#fade2a'];
const BY_LEGEND: Record<string, string> = {
  rotated: '#73bf69',
  recovered: '#5794f2',
  failed: '#f2495c',
  busy: '#ff9830',
  skipped: '#8e8e8e',
  aborted: '#b877d9',
};

const escape = (text: string): string =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

export function formatValue(value: number, unit: string, decimals?: number): string {
  if (!Number.isFinite(value)) return '—';
  if (decimals !== undefined && unit === 'short') return value.toFixed(decimals);
  if (unit === 'percentunit') return `${(value * 100).toFixed(value < 0.1 ? 1 : 0)}%`;
  if (unit === 's') {
    const abs = Math.abs(value);
    if (abs === 0) return '0 s';
    if (abs < 1) return `${(value * 1000).toFixed(abs < 0.01 ? 1 : 0)} ms`;
    if (abs < 120) return `${value.toFixed(abs < 10 ? 1 : 0)} s`;
    if (abs < 7200) return `${(value / 60).toFixed(1)} min`;
    if (abs < 172_800) return `${(value / 3600).toFixed(1)} h`;
    return `${(value / 86_400).toFixed(1)} d`;
  }
  return Number.isInteger(value) ? String(value) : value.toFixed(value < 10 ? 2 : 0);
}

function thresholdColor(thresholds: PanelData['thresholds'], value: number): string {
  let color = 'green';
  for (const step of thresholds) if (step.value === null || value >= step.value) color = step.color;
  return COLORS[color] ?? color;
}

function seriesColor(legend: string, index: number): string {
  const last = legend.split(' ').at(-1) ?? legend;
  return (
    BY_LEGEND[legend] ??
    (last === 'sent' ? '#73bf69' : last === 'failed' ? '#f2495c' : undefined) ??
    PALETTE[index % PALETTE.length] ??
    '#73bf69'
  );
}

function box(panel: PanelData): { left: number; top: number; width: number; height: number } {
  return {
    left: MARGIN + panel.gridPos.x * COLUMN + 4,
    top: 56 + panel.gridPos.y * ROW_HEIGHT + 4,
    width: panel.gridPos.w * COLUMN - 8,
    height: panel.gridPos.h * ROW_HEIGHT - 8,
  };
}

function lastValue(panel: PanelData): number | undefined {
  const values = panel.series
    .map((series) => series.points.at(-1)?.[1])
    .filter((value): value is number => value !== undefined && Number.isFinite(value));
  return values.length === 0 ? undefined : values.reduce((sum, value) => sum + value, 0);
}

function statBody(panel: PanelData, width: number, height: number): string {
  const value = lastValue(panel);
  if (value === undefined) return `<div class="nodata" style="height:${height}px">No data</div>`;
  return `<div class="stat" style="background:${thresholdColor(panel.thresholds, value)};height:${height}px;font-size:${Math.min(height * 0.55, width / 4)}px">${escape(formatValue(value, panel.unit, panel.decimals))}</div>`;
}

function barGaugeBody(panel: PanelData, width: number, height: number): string {
  const bars = panel.series
    .map((series) => ({ legend: series.legend, value: series.points.at(-1)?.[1] ?? Number.NaN }))
    .filter((bar) => Number.isFinite(bar.value))
    .sort((a, b) => b.value - a.value);
  if (bars.length === 0) return `<div class="nodata" style="height:${height}px">No data</div>`;
  const top = Math.max(...bars.map((bar) => bar.value), ...panel.thresholds.map((step) => step.value ?? 0));
  const each = Math.min(34, height / bars.length);
  const label = 190;
  const rows = bars.map((bar, index) => {
    const y = index * each;
    const length = Math.max(2, ((width - label - 90) * bar.value) / (top || 1));
    const color = thresholdColor(panel.thresholds, bar.value);
    return `<text x="0" y="${y + each * 0.62}" class="label">${escape(bar.legend)}</text><rect x="${label}" y="${y + each * 0.15}" width="${width - label - 90}" height="${each * 0.7}" fill="#22252b"/><rect x="${label}" y="${y + each * 0.15}" width="${length}" height="${each * 0.7}" fill="${color}"/><text x="${width - 4}" y="${y + each * 0.62}" class="value" fill="${color}" text-anchor="end">${escape(formatValue(bar.value, panel.unit))}</text>`;
  });
  return `<svg width="${width}" height="${height}">${rows.join('')}</svg>`;
}

function timeSeriesBody(panel: PanelData, width: number, height: number, from: number, to: number): string {
  const series = panel.series.filter((s) => s.points.some(([, v]) => Number.isFinite(v)));
  if (series.length === 0) return `<div class="nodata" style="height:${height}px">No data</div>`;
  const legendHeight = 22;
  const plotLeft = 56;
  const plotWidth = width - plotLeft - 6;
  const plotHeight = height - legendHeight - 18;
  const times = [...new Set(series.flatMap((s) => s.points.map(([t]) => t)))].sort((a, b) => a - b);
  const step = times.length > 1 ? (times.at(-1)! - times[0]!) / (times.length - 1) : 15;
  const stacked = new Map<number, number>();
  let top = 0;
  for (const s of series) {
    for (const [t, v] of s.points) {
      if (!Number.isFinite(v)) continue;
      const y = panel.bars ? (stacked.get(t) ?? 0) + v : v;
      if (panel.bars) stacked.set(t, y);
      top = Math.max(top, y);
    }
  }
  top = top === 0 ? 1 : top * 1.1;
  // Whole numbers on the axis of counts: three ticks of a whole step.
  if (panel.decimals === 0) top = 3 * Math.ceil(top / 3);
  const x = (t: number): number => plotLeft + ((t - from) / (to - from)) * plotWidth;
  const y = (v: number): number => 8 + (plotHeight - 8) - (v / top) * (plotHeight - 8);
  const parts: string[] = [];
  for (let i = 0; i <= 3; i++) {
    const v = (top * i) / 3;
    const text = formatValue(v, panel.unit, panel.decimals);
    parts.push(
      `<line x1="${plotLeft}" x2="${plotLeft + plotWidth}" y1="${y(v)}" y2="${y(v)}" class="grid"/><text x="${plotLeft - 6}" y="${y(v) + 4}" class="axis" text-anchor="end">${escape(text)}</text>`,
    );
  }
  for (let i = 0; i <= 4; i++) {
    const t = from + ((to - from) * i) / 4;
    const label = new Date(t * 1000).toISOString().slice(11, 16);
    parts.push(
      `<text x="${x(t)}" y="${plotHeight + 14}" class="axis" text-anchor="${i === 4 ? 'end' : 'middle'}">${label}</text>`,
    );
  }
  const base = new Map<number, number>();
  const barWidth = Math.max(1.5, (plotWidth * step) / (to - from) - 1);
  series.forEach((s, index) => {
    const color = seriesColor(s.legend, index);
    if (panel.bars) {
      for (const [t, v] of s.points) {
        if (!Number.isFinite(v) || v <= 0) continue;
        const below = base.get(t) ?? 0;
        base.set(t, below + v);
        parts.push(
          `<rect x="${x(t) - barWidth / 2}" y="${y(below + v)}" width="${barWidth}" height="${y(below) - y(below + v)}" fill="${color}" fill-opacity="0.85"/>`,
        );
      }
    } else {
      // Prometheus leaves out steps without a value and answers NaN where a quantile has no
      // observations: both break the line, and a value with no neighbour is drawn as a dot.
      const finite = s.points.filter(([, v]) => Number.isFinite(v));
      const near = (a: number | undefined, b: number): boolean =>
        a !== undefined && Math.abs(a - b) <= step * 1.5;
      let path = '';
      finite.forEach(([t, v], at) => {
        path += `${near(finite[at - 1]?.[0], t) ? 'L' : 'M'}${x(t).toFixed(1)},${y(v).toFixed(1)} `;
        if (!near(finite[at - 1]?.[0], t) && !near(finite[at + 1]?.[0], t))
          parts.push(`<circle cx="${x(t).toFixed(1)}" cy="${y(v).toFixed(1)}" r="3" fill="${color}"/>`);
      });
      parts.push(`<path d="${path}" fill="none" stroke="${color}" stroke-width="1.5"/>`);
    }
  });
  const legend = series
    .map(
      (s, index) =>
        `<span class="key"><i style="background:${seriesColor(s.legend, index)}"></i>${escape(s.legend)}</span>`,
    )
    .join('');
  return `<svg width="${width}" height="${plotHeight + 18}">${parts.join('')}</svg><div class="legend">${legend}</div>`;
}

export function renderDashboardHtml(input: {
  title: string;
  from: number;
  to: number;
  panels: PanelData[];
}): string {
  const range = `${new Date(input.from * 1000).toISOString().slice(0, 16).replace('T', ' ')} – ${new Date(input.to * 1000).toISOString().slice(11, 16)} UTC`;
  const panels = input.panels.map((panel) => {
    const { left, top, width, height } = box(panel);
    if (panel.type === 'row')
      return `<div class="row" style="left:${left}px;top:${top}px;width:${width}px">${escape(panel.title)}</div>`;
    const inner = height - 30;
    const body =
      panel.type === 'stat'
        ? statBody(panel, width - 16, inner - 8)
        : panel.type === 'bargauge'
          ? barGaugeBody(panel, width - 16, inner - 8)
          : timeSeriesBody(panel, width - 16, inner - 8, input.from, input.to);
    return `<div class="panel" style="left:${left}px;top:${top}px;width:${width}px;height:${height}px"><div class="title">${escape(panel.title)}</div><div class="body">${body}</div></div>`;
  });
  return `<!doctype html><html><head><meta charset="utf-8"><style>
body{margin:0;background:#111217;color:#ccccdc;font:13px Inter,"DejaVu Sans",Arial,sans-serif;width:${WIDTH}px;position:relative}
.header{height:48px;display:flex;align-items:center;gap:16px;padding:0 16px;border-bottom:1px solid #22252b}
.header b{font-size:17px;color:#fff}.header span{color:#8e8e8e}
.row{position:absolute;font-size:15px;font-weight:600;color:#fff;padding-top:4px}
.panel{position:absolute;background:#181b1f;border:1px solid #22252b;border-radius:3px;box-sizing:border-box;overflow:hidden}
.title{height:28px;line-height:28px;padding:0 8px;font-weight:500;color:#ccccdc;white-space:nowrap;overflow:hidden}
.body{padding:0 8px}
.stat{display:flex;align-items:center;justify-content:center;color:#fff;font-weight:600;border-radius:2px}
.nodata{display:flex;align-items:center;justify-content:center;color:#8e8e8e}
.grid{stroke:#2c3235;stroke-width:1}.axis{fill:#8e8e8e;font-size:11px}
.label{fill:#ccccdc;font-size:12px}.value{font-size:13px;font-weight:600}
.legend{display:flex;flex-wrap:wrap;gap:12px;font-size:12px;height:20px;overflow:hidden}
.key i{display:inline-block;width:14px;height:4px;margin-right:6px;vertical-align:middle;border-radius:2px}
</style></head><body><div class="header"><b>${escape(input.title)}</b><span>${escape(range)}</span><span>data source: Prometheus</span></div>${panels.join('')}</body></html>`;
}
