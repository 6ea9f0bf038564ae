"""People: faces found and embedded (faces.py), the names people's tools wrote into the files
(regions.py), and names carried from named faces to the others (naming.py).

Face embeddings are biometric data: pamir keeps them in the index folder and sends them
nowhere (docs/usage.md, "People").
"""

from .faces import (DETECT_SIDE, RASTER_SIDE, Face, FaceFinder, face_finder, find_faces,
                    load_for_detection, models_dir)
from .naming import (GROUP_DISTANCE, NAME_DISTANCE, REGION_IOU, NamedFace, assign, group,
                     keyword_names, name_confidence, name_faces, person_distances,
                     person_facts)
from .pictures import PicturePeople, find_people
from .regions import PeopleInFiles, Region, iou, person_tags, read_people, read_regions

__all__ = ["DETECT_SIDE", "RASTER_SIDE", "Face", "FaceFinder", "GROUP_DISTANCE", "NAME_DISTANCE",
           "NamedFace", "PeopleInFiles", "PicturePeople", "REGION_IOU", "Region", "assign",
           "face_finder", "find_faces", "find_people", "group", "iou", "keyword_names",
           "load_for_detection", "models_dir", "name_confidence", "name_faces",
           "person_distances", "person_facts", "person_tags", "read_people", "read_regions"]
