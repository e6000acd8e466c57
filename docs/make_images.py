"""Render the images of docs/blender.md: the Tangle panels and a headless bake's progress output.

    .venv/bin/python docs/make_images.py        # writes docs/images/panel_*.png and progress_cli.png

The bpy module has no window, so no screenshot can be taken. Instead the images are *rendered from the
real thing*:

- the panels: the add-on's own ``Panel.draw`` methods run on the demo scene after a real bake (cancelled
  part way, so the status lines have something to say) against a layout that records what they draw;
  the recorded rows (labels, property names and current values, buttons) are laid out the way Blender's
  property-split layout places them and rendered with Workbench, dark theme colours;
- the progress: ``python -m blender_addon.cli bake --resume`` on that file, run on a terminal (a
  pseudo-terminal); the lines the terminal shows at the end are rendered in a monospace font.

Re-run it after changing the panels or the progress output.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
IMAGES = REPOSITORY_ROOT / "docs" / "images"
sys.path.insert(0, str(REPOSITORY_ROOT))

import bpy  # noqa: E402  (after the path: the add-on is imported from this checkout)

# Blender's default dark theme, roughly (linear RGB for Workbench's flat object colours)
THEME = {"background": (0.030, 0.030, 0.030), "panel": (0.046, 0.046, 0.046), "header": (0.036, 0.036, 0.036),
         "field": (0.090, 0.090, 0.090), "button": (0.090, 0.090, 0.090), "text": (0.80, 0.80, 0.80),
         "dim": (0.45, 0.45, 0.45), "bar": (0.13, 0.27, 0.60), "box": (0.040, 0.040, 0.040),
         "terminal": (0.008, 0.008, 0.010), "warning": (0.9, 0.55, 0.1)}
LINE = 0.5          # height of one row [Blender units]
PIXELS_PER_UNIT = 44


# ---- recording what a panel draws ---------------------------------------------------------------

@dataclass
class Item:
    kind: str                      # column, row, box, label, prop, operator, menu, progress
    text: str = ""
    value: str = ""
    factor: float = 0.0
    children: list = field(default_factory=list)


class RecordingLayout:
    """Stands in for bpy.types.UILayout: keeps the tree of rows, columns, boxes and the items in them."""

    def __init__(self, item: Item):
        self.item = item
        self.use_property_split = True
        self.use_property_decorate = False

    def _child(self, kind):
        child = Item(kind)
        self.item.children.append(child)
        return RecordingLayout(child)

    def column(self, **kwargs):
        return self._child("column")

    def row(self, **kwargs):
        return self._child("row")

    def box(self):
        return self._child("box")

    def split(self, **kwargs):
        return self._child("row")

    def prop(self, data, name, text=None, **kwargs):
        prop = data.bl_rna.properties[name]
        self.item.children.append(Item("prop", prop.name if text is None else text, _value_text(data, prop)))

    def prop_search(self, data, name, search_data, search_name, **kwargs):
        self.prop(data, name)

    def operator(self, idname, text=None, **kwargs):
        module, name = idname.split(".")
        label = getattr(bpy.ops, module).__getattr__(name).get_rna_type().name
        self.item.children.append(Item("operator", label if text is None else text))

    def menu(self, menu, text=None, **kwargs):
        self.item.children.append(Item("operator", text or getattr(bpy.types, menu).bl_label + "  v"))

    def label(self, text="", **kwargs):
        self.item.children.append(Item("label", text))

    def progress(self, factor=0.0, text="", **kwargs):
        self.item.children.append(Item("progress", text, factor=factor))

    def separator(self, **kwargs):
        self.item.children.append(Item("label", ""))


def _value_text(data, prop) -> str:
    value = getattr(data, prop.identifier)
    if prop.type == "ENUM":
        return next((item.name for item in prop.enum_items if item.identifier == value), str(value))
    if prop.type == "BOOLEAN":
        return "[x]" if value else "[  ]"
    if prop.type == "FLOAT":
        unit = {"LENGTH": " m", "MASS": " kg"}.get(prop.unit, "")
        return f"{value:.4g}{unit}" if not hasattr(value, "__len__") else ", ".join(f"{v:.3g}" for v in value)
    return str(value)


def record(panel_class, context) -> Item:
    root = Item("column", panel_class.bl_label)
    panel_class.draw(type("Panel", (), {"layout": RecordingLayout(root)})(), context)
    return root


# ---- laying out and rendering ------------------------------------------------------------------

class Canvas:
    """Flat rectangles and text in the XY plane of an empty scene, rendered from above by Workbench."""

    def __init__(self, font_path: str | None = None):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        self.scene = bpy.context.scene
        self.font = bpy.data.fonts.load(font_path) if font_path else None

    def rect(self, x, y, width, height, colour, z=0.0):
        mesh = bpy.data.meshes.new("rect")
        mesh.from_pydata([(x, y, z), (x + width, y, z), (x + width, y - height, z), (x, y - height, z)], [],
                         [(0, 1, 2, 3)])
        obj = bpy.data.objects.new("rect", mesh)
        obj.color = (*colour, 1.0)
        self.scene.collection.objects.link(obj)

    def text(self, x, y, body, colour=THEME["text"], align="LEFT", size=0.26):
        if not body:
            return
        curve = bpy.data.curves.new("text", "FONT")
        curve.body, curve.size, curve.align_x = body, size, align
        if self.font is not None:
            curve.font = self.font
        obj = bpy.data.objects.new("text", curve)
        obj.location = (x, y - LINE * 0.68, 0.05)
        obj.color = (*colour, 1.0)
        self.scene.collection.objects.link(obj)

    def render(self, path: Path, width: float, height: float, background) -> None:
        scene = self.scene
        camera = bpy.data.objects.new("camera", bpy.data.cameras.new("camera"))
        camera.data.type, camera.data.ortho_scale = "ORTHO", max(width, height)
        camera.location = (width / 2, -height / 2, 10.0)
        scene.collection.objects.link(camera)
        scene.camera = camera
        render = scene.render
        render.engine = "BLENDER_WORKBENCH"
        render.resolution_x, render.resolution_y = int(width * PIXELS_PER_UNIT), int(height * PIXELS_PER_UNIT)
        render.resolution_percentage = 100
        render.image_settings.file_format = "PNG"
        render.filepath = str(path)
        shading = scene.display.shading
        shading.light, shading.color_type = "FLAT", "OBJECT"
        scene.view_settings.view_transform = "Standard"
        scene.display.render_aa = "32"
        world = bpy.data.worlds.new("world")
        world.color = background
        scene.world = world
        bpy.ops.render.render(write_still=True)


def _height(item: Item) -> float:
    if item.kind in ("column", "box"):
        inner = sum(_height(child) for child in item.children)
        return inner + (0.2 if item.kind == "box" and item.children else 0.0)
    if item.kind == "row":
        return max((_height(child) for child in item.children), default=0.0)
    return LINE


def _draw(canvas: Canvas, item: Item, x: float, y: float, width: float) -> float:
    """Draw ``item`` with its top-left corner at (x, y); returns its height."""
    gap = 0.06
    if item.kind in ("column", "box"):
        top = y
        if item.kind == "box":
            canvas.rect(x, y, width, _height(item), THEME["box"], z=0.01)
            x, y, width = x + 0.1, y - 0.1, width - 0.2
        for child in item.children:
            y -= _draw(canvas, child, x, y, width)
        return top - y + (0.1 if item.kind == "box" and item.children else 0.0)
    if item.kind == "row":
        if not item.children:
            return 0.0
        buttons = [child for child in item.children if child.kind == "operator" and not child.text]
        small = 0.5 * len(buttons)
        share = (width - small) / max(1, len(item.children) - len(buttons))
        left, tallest = x, 0.0
        for child in item.children:
            child_width = 0.5 if child in buttons else share
            tallest = max(tallest, _draw(canvas, child, left, y, child_width))
            left += child_width
        return tallest
    if item.kind == "label":
        canvas.text(x + 0.15, y, item.text)
    elif item.kind == "prop":
        split = x + width * 0.42
        canvas.text(split - 0.15, y, item.text, THEME["text"], align="RIGHT")
        canvas.rect(split, y - gap, x + width - split - gap, LINE - 2 * gap, THEME["field"], z=0.02)
        canvas.text(split + 0.12, y, item.value)
    elif item.kind == "operator":
        canvas.rect(x + gap, y - gap, width - 2 * gap, LINE - 2 * gap, THEME["button"], z=0.02)
        canvas.text(x + width / 2, y, item.text or "o", align="CENTER")
    elif item.kind == "progress":
        canvas.rect(x + gap, y - gap, width - 2 * gap, LINE - 2 * gap, THEME["field"], z=0.02)
        canvas.rect(x + gap, y - gap, (width - 2 * gap) * item.factor, LINE - 2 * gap, THEME["bar"], z=0.03)
        canvas.text(x + width / 2, y, item.text, align="CENTER")
    return LINE


def render_panels(panels: list[tuple[str, Item]], path: Path, width: float = 13.0) -> None:
    canvas = Canvas()
    y = -0.2
    for title, tree in panels:
        canvas.rect(0.2, y, width - 0.4, LINE, THEME["header"], z=0.01)
        canvas.text(0.35, y, f"v  {title}")
        y -= LINE
        height = _height(tree) + 0.2
        canvas.rect(0.2, y, width - 0.4, height, THEME["panel"], z=0.0)
        _draw(canvas, tree, 0.3, y - 0.1, width - 0.6)
        y -= height + 0.15
    canvas.render(path, width, -y + 0.05, THEME["background"])


def render_terminal(lines: list[str], path: Path, title: str) -> None:
    font = next(Path(bpy.utils.resource_path("LOCAL")).glob("datafiles/fonts/DejaVuSansMono*"), None)
    canvas = Canvas(str(font) if font else None)
    columns = max(len(line) for line in lines) + 2
    width = columns * 0.145 + 0.4
    canvas.rect(0.0, 0.0, width, LINE, THEME["header"], z=0.01)
    canvas.text(width / 2, 0.0, title, THEME["dim"], align="CENTER", size=0.22)
    for row, line in enumerate(lines):
        colour = THEME["warning"] if line.startswith("tangle: cancelled") else THEME["text"]
        canvas.text(0.2, -LINE * (row + 1.2), line, colour, size=0.24)
    canvas.render(path, width, LINE * (len(lines) + 1.8), THEME["terminal"])


# ---- the scene, the bake, the progress output ------------------------------------------------------

def baked_demo(address: str, blend: Path, cancel_after: int) -> None:
    """The demo scene baked on ``address`` and cancelled after ``cancel_after`` frames, saved to ``blend``."""
    from blender_addon import demo
    from blender_addon.bake_session import BakeSession

    scene = demo.build_scene(frames=24, vertices_per_side=24)
    scene.tangle.server_address = address
    session = BakeSession(scene).start()
    while not session.finished:
        time.sleep(0.02)
        session.handle_pending()
        if session.progress.frames_done >= cancel_after:
            session.cancel()
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))


def panel_images(blend: Path) -> list[Path]:
    from blender_addon import demo, panels

    bpy.ops.wm.open_mainfile(filepath=str(blend))
    scene = bpy.context.scene
    cloth = bpy.data.objects[demo.CLOTH_NAME]
    context = type("Context", (), {"object": cloth, "scene": scene, "preferences": bpy.context.preferences})()
    object_path, bake_path = IMAGES / "panel_object.png", IMAGES / "panel_bake.png"
    render_panels([("Tangle", record(panels.TANGLE_PT_object, context)),
                   ("Painted Maps", record(panels.TANGLE_PT_object_maps, context))], object_path)
    bpy.ops.wm.open_mainfile(filepath=str(blend))
    scene = bpy.context.scene
    context = type("Context", (), {"object": None, "scene": scene, "preferences": bpy.context.preferences})()
    render_panels([("Tangle Bake", record(panels.TANGLE_PT_bake, context)),
                   ("Connection, Output, Resume", record(panels.TANGLE_PT_bake_workflow, context))], bake_path)
    return [object_path, bake_path]


def cli_output(blend: Path, address: str) -> str:
    """What ``python -m blender_addon.cli bake --resume`` prints (stdout and stderr) on a terminal."""
    command = [sys.executable, "-m", "blender_addon.cli", "bake", str(blend), "--address", address, "--resume"]
    environment = dict(os.environ, PYTHONPATH=str(REPOSITORY_ROOT), COLUMNS="100")
    leader, follower = pty.openpty()
    process = subprocess.Popen(command, cwd=REPOSITORY_ROOT, env=environment, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        if process.poll() is not None and not ready:
            break
    process.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def screen_lines(output: str) -> list[str]:
    """The lines a terminal shows after ``output``: each carriage return redraws its line."""
    lines = []
    for line in ANSI_ESCAPE.sub("", output).replace("\r\n", "\n").split("\n"):
        shown = line.split("\r")[-1]
        shown = "".join(character for character in shown if character.isprintable())
        if shown.strip() and not shown.startswith(("Read blend", "Info:", "Freeing memory", "Error: Not freed")):
            lines.append(shown.rstrip())
    return lines


def main() -> int:
    import blender_addon
    from blender_addon.core.local_server import LocalServer

    IMAGES.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "tangle_doc_images"
    work.mkdir(parents=True, exist_ok=True)
    blend = work / "shot.blend"
    blender_addon.register()
    server = LocalServer(log_path=work / "server.log")
    address = server.start()
    try:
        baked_demo(address, blend, cancel_after=10)
        written = panel_images(blend)
        bpy.ops.wm.open_mainfile(filepath=str(blend))
        output = cli_output(blend, address)
    finally:
        server.stop()
    redraws = [index for index, character in enumerate(output) if character == "\r"]
    halfway = output[:redraws[len(redraws) // 2]] if redraws else output
    command = f"$ python -m blender_addon.cli bake {blend.name} --address {address} --resume"
    render_terminal([command] + screen_lines(halfway) + ["", "... at the end:", "", command] + screen_lines(output),
                    IMAGES / "progress_cli.png", "terminal: Resume of the cancelled bake, half way and at the end")
    written.append(IMAGES / "progress_cli.png")
    blender_addon.unregister()  # bpy 4.5 hangs at interpreter exit while operator classes are registered
    print("wrote " + ", ".join(str(path.relative_to(REPOSITORY_ROOT)) for path in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
