"""Reference solution: the beam serviceability review (workbook with live formulas, results.csv,
PDF memo) from the read-only design basis and candidate sections in /app/inputs."""

import csv
import json
from pathlib import Path

from openpyxl import Workbook
from openpyxl.styles import Font
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

INPUTS, OUT = Path("/app/inputs"), Path("/app/deliverables")
OUT.mkdir(parents=True, exist_ok=True)
basis = json.loads((INPUTS / "design_basis.json").read_text())
with open(INPUTS / "sections.csv", newline="") as f:
    sections = list(csv.DictReader(f))

# --- the workbook -------------------------------------------------------------------------
wb = Workbook()
ws = wb.active
ws.title = "Inputs"
ws.append(["Design basis", "Value"])
for key in ("span_m", "imposed_udl_kN_per_m", "E_GPa", "allowable_bending_stress_MPa",
            "deflection_limit_span_over", "gravity_m_per_s2"):
    ws.append([key, float(basis[key])])
ws["A9"], ws["B9"], ws["C9"], ws["D9"], ws["E9"] = "Designation", "Mass kg/m", "I cm4", "W_el cm3", "Cost per m"
for i, s in enumerate(sections):
    r = 10 + i
    ws.cell(r, 1, s["designation"])
    for col, key in ((2, "mass_kg_per_m"), (3, "I_cm4"), (4, "W_el_cm3"), (5, "cost_per_m")):
        ws.cell(r, col, float(s[key]))

checks = wb.create_sheet("Checks")
checks.append(["Designation", "Total UDL (kN/m)", "Moment (kNm)", "Stress (MPa)", "Deflection (mm)",
               "Deflection limit (mm)", "Stress OK", "Deflection OK", "Beam cost"])
for i in range(len(sections)):
    r, src = 2 + i, 10 + i
    checks[f"A{r}"] = f"=Inputs!A{src}"
    checks[f"B{r}"] = f"=Inputs!$B$3+Inputs!B{src}*Inputs!$B$7/1000"            # kN/m
    checks[f"C{r}"] = f"=B{r}*Inputs!$B$2^2/8"                                     # kNm
    checks[f"D{r}"] = f"=C{r}*1000/Inputs!D{src}"                                  # N/mm2 (kNm*1e6 / cm3*1e3)
    checks[f"E{r}"] = (f"=5*B{r}*(Inputs!$B$2*1000)^4/(384*Inputs!$B$4*1000*Inputs!C{src}*10000)")  # mm
    checks[f"F{r}"] = "=Inputs!$B$2*1000/Inputs!$B$6"
    checks[f"G{r}"] = f"=D{r}<=Inputs!$B$5"
    checks[f"H{r}"] = f"=E{r}<=F{r}"
    checks[f"I{r}"] = f"=Inputs!E{src}*Inputs!$B$2"
    checks[f"J{r}"] = f'=IF(AND(G{r},H{r}),I{r},"")'
checks["J1"] = "Cost if OK"
last = 1 + len(sections)
checks["A8"], checks["B8"] = "Lowest cost passing", f"=MIN(J2:J{last})"
checks["A9"], checks["B9"] = "Selected section", f"=INDEX(A2:A{last},MATCH(B8,J2:J{last},0))"
for sheet in wb.worksheets:
    for cell in sheet[1]:
        cell.font = Font(bold=True)
wb.save(OUT / "beam_review.xlsx")

# --- the same checks in Python for results.csv and the memo ----------------------------------
span, imposed = float(basis["span_m"]), float(basis["imposed_udl_kN_per_m"])
E, allow = float(basis["E_GPa"]), float(basis["allowable_bending_stress_MPa"])
limit = span * 1000 / float(basis["deflection_limit_span_over"])
rows = []
for s in sections:
    w = imposed + float(s["mass_kg_per_m"]) * float(basis["gravity_m_per_s2"]) / 1000
    moment = w * span ** 2 / 8
    stress = moment * 1000 / float(s["W_el_cm3"])
    deflection = 5 * w * (span * 1000) ** 4 / (384 * E * 1000 * float(s["I_cm4"]) * 10000)
    rows.append({"designation": s["designation"], "total_udl_kN_per_m": w, "moment_kNm": moment,
                 "stress_MPa": stress, "deflection_mm": deflection, "stress_ok": stress <= allow,
                 "deflection_ok": deflection <= limit, "beam_cost": float(s["cost_per_m"]) * span})
with open(OUT / "results.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(list(rows[0]))
    for r in rows:
        writer.writerow([r["designation"], f"{r['total_udl_kN_per_m']:.4f}", f"{r['moment_kNm']:.3f}",
                         f"{r['stress_MPa']:.2f}", f"{r['deflection_mm']:.2f}", "yes" if r["stress_ok"] else "no",
                         "yes" if r["deflection_ok"] else "no", f"{r['beam_cost']:.2f}"])

passing = [r for r in rows if r["stress_ok"] and r["deflection_ok"]]
pick = min(passing, key=lambda r: r["beam_cost"]) if passing else None
pdf = canvas.Canvas(str(OUT / "review_memo.pdf"), pagesize=A4)
lines = [(14, f"Serviceability review: {basis['project']}"),
         (10, f"Simply supported span {span:g} m, imposed UDL {imposed:g} kN/m plus self-weight; E = {E:g} GPa."),
         (10, f"Criteria: bending stress <= {allow:g} MPa, deflection <= span/{basis['deflection_limit_span_over']} "
              f"= {limit:.2f} mm."),
         (10, f"Candidates checked: {len(rows)}; passing both criteria: {len(passing)}.")]
for r in rows:
    lines.append((9, f"{r['designation']}: stress {r['stress_MPa']:.1f} MPa, deflection {r['deflection_mm']:.2f} mm, "
                     f"{'PASS' if r['stress_ok'] and r['deflection_ok'] else 'FAIL'}, cost {r['beam_cost']:,.2f}"))
if pick:
    lines += [(12, f"Selected section: {pick['designation']}"),
              (10, f"Stress {pick['stress_MPa']:.1f} MPa ({pick['stress_MPa'] / allow:.0%} of the limit), deflection "
                   f"{pick['deflection_mm']:.2f} mm ({pick['deflection_mm'] / limit:.0%} of the limit), beam cost "
                   f"{pick['beam_cost']:,.2f}.")]
else:
    lines.append((12, "Selected section: none (no candidate passes both criteria)"))
y = 800
for size, text in lines:
    pdf.setFont("Helvetica-Bold" if size > 10 else "Helvetica", size)
    pdf.drawString(50, y, text)
    y -= 22
pdf.showPage()
pdf.save()
print("selected:", pick["designation"] if pick else None)
